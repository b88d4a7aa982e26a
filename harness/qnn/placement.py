"""Where an ExecuTorch program's work runs, read from the program itself (docs/placement.md).

Each execution plan's chains list its instructions (schema `program.fbs`): a DelegateCall runs
one of the plan's delegates (QnnBackend: the NPU), a KernelCall runs an operator on the CPU
(its `operators` entry names it, `aten::_to_copy` + overload `out`). Operators of the
`executorch_prim` namespace are the runtime's own bookkeeping on sizes and views, not model
compute, so they are counted apart. No ETDump and nothing from ExecuTorch is needed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from harness.evidence import MethodPlacement, Placement, count_pairs
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


__all__ = ["BOOKKEEPING_NAMESPACE", "MethodPlacement", "Placement", "read_placement"]
