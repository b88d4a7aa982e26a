"""Where a QNN export's work runs, read from the export itself (docs/placement.md): an ExecuTorch
program (`read_placement`) or an MNN NPU stub (`read_stub_placement`).

Each execution plan's chains list its instructions (schema `program.fbs`): a DelegateCall runs
one of the plan's delegates (QnnBackend: the NPU), a KernelCall runs an operator on the CPU
(its `operators` entry names it, `aten::_to_copy` + overload `out`). Operators of the
`executorch_prim` namespace are the runtime's own bookkeeping on sizes and views, not model
compute, so they are counted apart. No ETDump and nothing from ExecuTorch is needed.

An MNN stub (`qnn/llm.mnn`, MNN's compilefornpu) runs each QNN context binary in one `Plugin`
op of type `QNN`; every other compute op runs on MNN's CPU backend (`Input`/`Const` feed, they
compute nothing). llm_demo's own words on it: `qnn_plugin_inits`.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from pathlib import Path

from harness.evidence import MNN_QNN_PLUGIN, MethodPlacement, Placement, count_pairs
from harness.mnn_graph import load_graph_json
from harness.qnn.pte import open_program

# Instruction.instr_args is a flatbuffer union: slot 0 its type, slot 1 the table.
_KERNEL_CALL, _DELEGATE_CALL = 1, 2
BOOKKEEPING_NAMESPACE = "executorch_prim::"


def read_placement(path: Path) -> Placement:
    """The placement of the program at `path`. PteError (an ArtifactError) names the file."""
    flat, program = open_program(path)
    methods = []
    for plan in flat.vector(program, 1):  # Program.execution_plan
        ops = []
        for op in flat.vector(plan, 6):  # ExecutionPlan.operators: name, overload
            name, overload = flat.string(op, 0), flat.string(op, 1)
            ops.append(f"{name}.{overload}" if overload else name)
        backends = [flat.string(d, 0) for d in flat.vector(plan, 7)]  # ExecutionPlan.delegates: id
        delegates: Counter[str] = Counter()
        kernels: Counter[str] = Counter()
        for chain in flat.vector(plan, 5):  # ExecutionPlan.chains
            for instr in flat.vector(chain, 2):  # Chain.instructions
                kind = flat.scalar(instr, 0, "B")
                if kind not in (_KERNEL_CALL, _DELEGATE_CALL):
                    continue  # moves, jumps, frees: no work placed anywhere
                at = flat.field(instr, 1)
                index = flat.scalar(flat.ref(at), 0, "i") if at is not None else -1  # 0 is omitted (the default)
                table = ops if kind == _KERNEL_CALL else backends
                if not 0 <= index < len(table):
                    raise flat._bad(f"an instruction names entry {index} of {len(table)}")
                (kernels if kind == _KERNEL_CALL else delegates)[table[index]] += 1
        compute = {k: n for k, n in kernels.items() if not k.startswith(BOOKKEEPING_NAMESPACE)}
        prim = {k: n for k, n in kernels.items() if k.startswith(BOOKKEEPING_NAMESPACE)}
        if kernels or delegates:  # constant methods (get_max_seq_len ...) place no work
            methods.append(MethodPlacement(flat.string(plan, 0), count_pairs(delegates), count_pairs(compute),
                                           count_pairs(prim)))
    return Placement(tuple(methods))


# MNN ops that hold or feed tensors and compute nothing (the graph's inputs and constants).
MNN_FEED_OPS = frozenset({"Input", "Const"})
# QNNBackend.cpp's PluginExecuteRaw::init prints `FUNC_PRINT(stateNumber)` once per QNN Plugin op it
# creates (MNN 4d40bdbd): `stateNumber=0 in init, 1409` on stdout, or logcat with MNN_USE_LOGCAT.
_PLUGIN_INIT = re.compile(r"^\s*stateNumber=-?\d+ in init\b", re.M)


def read_stub_placement(path: Path, *, name: str | None = None) -> Placement:
    """The placement of the MNN graph at `path` (an NPU stub, or any llm.mnn / its JSON dump):
    QNN Plugin ops as the delegate `QNN`, other compute ops by type as CPU ops. ArtifactError
    names the file."""
    try:
        st = path.stat()
    except OSError:
        st = None
    key = (st.st_size, st.st_mtime_ns) if st is not None else None
    return _stub_placement(path, key, name or path.name)


@functools.lru_cache(maxsize=32)  # a matrix asks once per cell; the converter dump is a child process
def _stub_placement(path: Path, _version: tuple[int, int] | None, name: str) -> Placement:
    graph = load_graph_json(path)
    delegates: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    feed: Counter[str] = Counter()
    for op in graph["oplists"]:
        kind = str(op.get("type") or op.get("main_type") or "?") if isinstance(op, dict) else "?"
        main = op.get("main") if isinstance(op, dict) else None
        if kind == "Plugin" and isinstance(main, dict) and main.get("type") == MNN_QNN_PLUGIN:
            delegates[MNN_QNN_PLUGIN] += 1
        elif kind in MNN_FEED_OPS:
            feed[kind] += 1
        else:  # a Plugin of another NPU (RKNN, NeuroPilot) is no QNN graph either
            cpu[kind if kind != "Plugin" else f"Plugin:{(main or {}).get('type')}"] += 1
    return Placement((MethodPlacement(name, count_pairs(delegates), count_pairs(cpu), count_pairs(feed)),))


def qnn_plugin_inits(output: str) -> int:
    """How many QNN Plugin kernels llm_demo said it created in `output` (its stdout and logcat)."""
    return len(_PLUGIN_INIT.findall(output))


__all__ = ["BOOKKEEPING_NAMESPACE", "MNN_FEED_OPS", "qnn_plugin_inits", "read_placement", "read_stub_placement"]
