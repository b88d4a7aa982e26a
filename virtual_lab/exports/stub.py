"""The NPU stubs qnn/llm.mnn and qnn/visual.mnn in compilefornpu's layout.

Real MNN models: one QNN `Plugin` op per context binary with path / allGraphName / allInputShape /
inputs / outputs / o_<shape>_<k> (docs/qnn-export-artifacts.md), written with the `mnn` package's
converter from the same makeIOJson configs as the sidecar's `io`, so harness.qnn.compiled_io reads
them as it reads a real export. `set_compiled_dims` (and binaries.py `edit_stub`) rewrite one (faulty
stubs for tests).
"""

from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from virtual_lab.exports.spec import DEEPSTACK_LAYERS, ExportSpec, llm_io, visual_io

_INT_INPUTS = {"position_ids", "logits_index", "idx_tensor"}


@dataclass(frozen=True)
class PluginSpec:
    """One context binary as the stub's Plugin op describes it."""

    path: str  # "qnn/graphllm0.bin"
    graph_names: tuple[str, ...]  # one per compiled shape
    inputs: tuple[str, ...]  # tensor names
    outputs: tuple[str, ...]
    input_dims: tuple[tuple[tuple[int, ...], ...], ...]  # [shape][input] -> dims
    output_dims: tuple[tuple[tuple[int, ...], ...], ...]  # [shape][output] -> dims


def _declared(per_shape: Sequence[Sequence[int]]) -> list[int]:
    """An Input op's dims: fixed where every compiled shape agrees, -1 where they differ."""
    first = list(per_shape[0])
    return [d if all(len(s) == len(first) and s[k] == d for s in per_shape) else -1
            for k, d in enumerate(first)]


def stub_graph(configs: Sequence[dict], plugins: Sequence[PluginSpec], outputs: Sequence[str]) -> dict:
    """The MNN graph JSON (mnnconvert's dump format) of a compilefornpu stub: the top-level
    Input ops, then one Plugin op (type QNN) per context binary with the attributes the QNN
    plugin reads (docs/qnn-export-artifacts.md)."""
    names: list[str] = []
    index: dict[str, int] = {}

    def tensor(name: str) -> int:
        if name not in index:
            index[name] = len(names)
            names.append(name)
        return index[name]

    ops: list[dict] = []
    for inp in configs[0]["inputs"]:
        name = inp["name"]
        per_shape = [next(i["shape"] for i in c["inputs"] if i["name"] == name) for c in configs]
        main: dict[str, Any] = {"dims": _declared(per_shape), "dformat": "NCHW"}
        if name in _INT_INPUTS or inp.get("type") == "int":
            main["dtype"] = "DT_INT32"
        ops.append({"main_type": "Input", "main": main, "name": name,
                    "outputIndexes": [tensor(name)], "type": "Input"})
    for p in plugins:
        ins = [tensor(n) for n in p.inputs]
        outs = [tensor(n) for n in p.outputs]
        attrs: list[dict] = [
            {"key": "path", "s": p.path},
            {"key": "inputs", "list": {"s": [f"t{i}" for i in ins]}},
            {"key": "allGraphName", "list": {"s": list(p.graph_names)}},
            {"key": "outputs", "list": {"s": [f"t{i}" for i in outs]}},
            {"key": "allInputShape", "list": {"i": [d for shape in p.input_dims for dims in shape for d in dims]}},
        ]
        for si, shape in enumerate(p.output_dims):
            attrs += [{"key": f"o_{si}_{k}", "tensor": {"dims": list(dims)}} for k, dims in enumerate(shape)]
        ops.append({"inputIndexes": ins, "main_type": "Plugin", "main": {"type": "QNN", "attr": attrs},
                    "name": p.path, "outputIndexes": outs, "type": "Plugin"})
    return {"bizCode": "MNNTest", "extraInfo": {"version": "3.6.1"}, "oplists": ops,
            "outputName": list(outputs), "sourceType": "ONNX", "tensorName": names}


def llm_plugins(spec: ExportSpec) -> list[PluginSpec]:
    """The LLM split like compilefornpu splits it: graph 0 takes the positions and embeddings,
    the deepstack layers take deepstack_embeds, the last graph writes the logits."""
    configs = llm_io(spec)["configs"]
    dims = [{i["name"]: tuple(i["shape"]) for i in c["inputs"]} for c in configs]
    seqs = [d["input_ids"][0] for d in dims]
    n = spec.n_llm_graphs
    ds_graphs = set(range(1, min(DEEPSTACK_LAYERS, n - 1) + 1)) or {0}
    plugins = []
    hidden_in = ""
    for k in range(n):
        ins = ["position_ids", "input_ids"] if k == 0 else [hidden_in]
        if spec.is_visual and k in ds_graphs:
            ins.append("deepstack_embeds")
        last = k == n - 1
        out = "logits" if last else f"/blocks.{k}/Add_output_0"
        in_dims = tuple(tuple(dims[si][i] if i in dims[si] else (1, seq, spec.hidden) for i in ins)
                        for si, seq in enumerate(seqs))
        out_dims = tuple(((1, seq, spec.vocab if last else spec.hidden),) for seq in seqs)
        plugins.append(PluginSpec(f"qnn/graphllm{k}.bin", (f"graphllm{k}", f"graphllm1_{k}"), tuple(ins),
                                   (out,), in_dims, out_dims))
        hidden_in = out
    return plugins


def visual_plugins(spec: ExportSpec) -> list[PluginSpec]:
    configs = visual_io(spec)["configs"]
    seqs = [c["inputs"][0]["shape"][0] for c in configs]
    top = [i["name"] for i in configs[0]["inputs"]]
    n = spec.n_visual_graphs
    plugins = []
    hidden_in = ""
    for k in range(n):
        ins = top if k == 0 else [hidden_in]
        last = k == n - 1
        outs = list(spec.visual_outputs) if last else [f"/visual/blocks.{k}/Add_output_0"]
        in_dims = tuple(tuple(tuple(next(i["shape"] for i in c["inputs"] if i["name"] == name))
                              if name in top else (seq, 1024) for name in ins)
                        for c, seq in zip(configs, seqs))
        out_dims = tuple(tuple(((DEEPSTACK_LAYERS, seq // 4, spec.hidden) if o == "deepstack_feature"
                                else (seq // 4, spec.hidden) if last else (seq, 1024)) for o in outs)
                         for seq in seqs)
        names = (f"graphvisual{k}",) + tuple(f"graphvisual{i}_{k}" for i in range(1, len(configs)))
        plugins.append(PluginSpec(f"qnn/graphvisual{k}.bin", names, tuple(ins), tuple(outs), in_dims, out_dims))
        hidden_in = outs[0]
    return plugins


def convert_script() -> str:
    # The `mnn` package's converter through `_tools` (never the `mnnconvert` console script,
    # whose wrapper pip-installs a telemetry SDK); the same call harness.checks.quant makes.
    return "import sys, _tools; _tools.mnnconvert(['mnnconvert'] + sys.argv[1:])"


@functools.lru_cache(maxsize=16)
def stub_bytes(graph_json: str) -> bytes:
    """JSON -> .mnn with the converter (`-f JSON`); cached, since tests write many alike exports."""
    with tempfile.TemporaryDirectory(prefix="vlab-stub-") as tmp:
        src, out = Path(tmp) / "stub.json", Path(tmp) / "stub.mnn"
        src.write_text(graph_json, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-c", convert_script(), "-f", "JSON", "--modelFile", str(src),
                               "--MNNModel", str(out)], capture_output=True, text=True, timeout=300)
        if "No module named '_tools'" in proc.stderr:
            raise ValueError("writing the NPU stub qnn/*.mnn needs the `mnn` package's converter: "
                             "pip install 'harness[dev]' (or 'harness[mnn]')")
        if not out.is_file() or out.stat().st_size == 0:
            detail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            raise ValueError(f"the mnn converter could not write the NPU stub ({detail[0]})")
        return out.read_bytes()


def plugins_of(graph: dict) -> list[PluginSpec]:
    """The Plugin ops of a stub's JSON graph as PluginSpecs (the inverse of stub_graph)."""
    names = graph["tensorName"]
    out = []
    for op in graph["oplists"]:
        if op.get("type") != "Plugin":
            continue
        attrs = {a["key"]: a for a in op["main"]["attr"]}
        graphs = tuple(attrs["allGraphName"]["list"]["s"])
        flat = attrs["allInputShape"]["list"]["i"]
        per = len(flat) // len(graphs)
        ranks = _ranks_of(graph, op, per)
        in_dims = []
        for si in range(len(graphs)):
            cur, pos, dims = flat[si * per:(si + 1) * per], 0, []
            for r in ranks:
                dims.append(tuple(cur[pos:pos + r]))
                pos += r
            in_dims.append(tuple(dims))
        outs = op.get("outputIndexes", [])
        out_dims = tuple(tuple(tuple(attrs[f"o_{si}_{k}"]["tensor"]["dims"]) for k in range(len(outs)))
                         for si in range(len(graphs)))
        out.append(PluginSpec(attrs["path"]["s"], graphs, tuple(names[i] for i in op["inputIndexes"]),
                              tuple(names[i] for i in outs), tuple(in_dims), out_dims))
    return out


def set_compiled_dims(graph: dict, tensor: str, dims: Sequence[Sequence[int]]) -> int:
    """In a stub's JSON graph, compile `tensor` with dims[shape index] in every Plugin op that
    takes it (allInputShape rewritten; ranks may change). Returns how many ops changed."""
    names = graph["tensorName"]
    changed = 0
    for op in graph["oplists"]:
        if op.get("type") != "Plugin" or tensor not in [names[i] for i in op.get("inputIndexes", [])]:
            continue
        attrs = {a["key"]: a for a in op["main"]["attr"]}
        graphs = len(attrs["allGraphName"]["list"]["s"])
        flat = attrs["allInputShape"]["list"]["i"]
        ins = [names[i] for i in op["inputIndexes"]]
        per = len(flat) // graphs
        ranks = _ranks_of(graph, op, per)
        rebuilt: list[int] = []
        for si in range(graphs):
            cur = flat[si * per:(si + 1) * per]
            pos = 0
            for name, r in zip(ins, ranks):
                rebuilt += list(dims[si]) if name == tensor else cur[pos:pos + r]
                pos += r
        attrs["allInputShape"]["list"]["i"] = rebuilt
        changed += 1
    return changed


def _ranks_of(graph: dict, op: dict, per: int) -> list[int]:
    names = graph["tensorName"]
    known: dict[int, int] = {}
    for other in graph["oplists"]:
        if other.get("type") == "Input":
            known[other["outputIndexes"][0]] = len(other["main"]["dims"])
        elif other.get("type") == "Plugin":
            attrs = {a["key"]: a for a in other["main"]["attr"]}
            for k, i in enumerate(other.get("outputIndexes", [])):
                if f"o_0_{k}" in attrs:
                    known[i] = len(attrs[f"o_0_{k}"]["tensor"]["dims"])
    ranks = [known.get(i, 0) for i in op["inputIndexes"]]
    if 0 in ranks:
        ranks[ranks.index(0)] = per - sum(ranks)
    if sum(ranks) != per:
        raise ValueError(f"cannot tell the ranks of {[names[i] for i in op['inputIndexes']]}")
    return ranks


def graph_io(plugins: Sequence[PluginSpec]) -> dict[str, dict]:
    """Per context binary path: each graph's inputs/outputs as QNN names them (t<K>) with dims,
    for the virtual lab's stand-in of qnn-context-binary-utility."""
    out: dict[str, dict] = {}
    for p in plugins:
        out[p.path] = {g: {"inputs": [list(d) for d in p.input_dims[si]],
                           "outputs": [list(d) for d in p.output_dims[si]]}
                       for si, g in enumerate(p.graph_names)}
    return out
