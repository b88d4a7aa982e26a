"""The CPU graphs of a VL export, read statically: the visual graph's outputs (`visual.mnn`:
`image_embeds` and each DeepStack feature) against the LLM graph's inputs (`llm.mnn`:
the embeddings input and `deepstack_embeds`), for any export that holds them, one made by
`llmexport.py` alone (no `qnn/` folder) or a QNN one (docs/mnn-export-layout.md#cpu-graph-io).

Graphs become JSON only through `harness.mnn_graph`. Output widths are not stored in an MNN
graph; they are read from the last linear layer (`outputCount`) behind each output, through
the shape-only ops the exporter puts after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checks.shapes.compiled import ModelNeeds, fmt_shape
from harness.checks.shapes.findings import ERROR, WARNING, ShapeKind, shape_finding
from harness.errors import ArtifactError
from harness.findings import Finding
from harness.mnn_graph import load_graph_json

SOURCE = "graph"
# Ops that keep the last axis between a linear layer and a graph output.
_PASS_THROUGH = {"Unsqueeze", "Squeeze", "Reshape", "ConvertTensor", "Cast", "Identity"}
_LINEAR = {"Convolution", "MatMul", "InnerProduct"}
EMBEDS_INPUT = "input_ids"  # MNN's LLM graph takes the embeddings under this name
DEEPSTACK_INPUT = "deepstack_embeds"


@dataclass(frozen=True)
class VisualOutputs:
    embeds_width: int | None  # None: not traceable
    deepstack_count: int  # DeepStack features stacked into one output (0: none)
    deepstack_width: int | None


def graph_inputs(graph: dict[str, Any]) -> dict[str, list[int]]:
    """Input name -> dims of an MNN graph's Input ops (-1 = dynamic)."""
    names = graph["tensorName"]
    out = {}
    for op in graph["oplists"]:
        if op.get("type") == "Input":
            main = op.get("main") or {}
            for i in op.get("outputIndexes", []):
                out[names[i]] = list(main.get("dims", []))
    return out


def _producers(graph: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {o: op for op in graph["oplists"] for o in op.get("outputIndexes", [])}


def _width(graph: Mapping[str, object], prod: dict[int, dict[str, Any]], idx: int, depth: int = 0) -> int | None:
    """outputCount of the linear layer behind tensor `idx`, through shape-only ops."""
    op = prod.get(idx)
    if op is None or depth > 8:
        return None
    if op.get("type") in _LINEAR:
        common = (op.get("main") or {}).get("common") or {}
        count = common.get("outputCount")
        return count if isinstance(count, int) else None
    if op.get("type") in _PASS_THROUGH and op.get("inputIndexes"):
        return _width(graph, prod, op["inputIndexes"][0], depth + 1)
    return None


def visual_outputs(graph: dict[str, Any]) -> VisualOutputs:
    names, prod = graph["tensorName"], _producers(graph)
    outputs = list(graph.get("outputName") or [])
    embeds = next((o for o in outputs if "image_embeds" in o), outputs[0] if outputs else None)
    width = _width(graph, prod, names.index(embeds)) if embeds in names else None
    ds = next((o for o in outputs if "deepstack" in o), None)
    count, ds_width = 0, None
    if ds is not None and ds in names:
        op = prod.get(names.index(ds))
        parts = op.get("inputIndexes", []) if op is not None and op.get("type") == "Concat" else [names.index(ds)]
        count = len(parts)
        widths = {_width(graph, prod, i) for i in parts}
        ds_width = widths.pop() if len(widths) == 1 else None
    return VisualOutputs(width, count, ds_width)


def _load(base: Path, name: str) -> tuple[dict[str, Any] | None, str]:
    """The graph (its .json beside it preferred: no converter needed), or the reason it is not read."""
    for candidate in (base / f"{name}.json", base / name):
        if candidate.is_file():
            try:
                return load_graph_json(candidate), candidate.name
            except ArtifactError as exc:
                return None, str(exc)
    return None, f"{name} is missing"


def check_cpu_graph_io(model: ModelNeeds, base: Path, rel: str, visual_model: str = "visual.mnn",
                       llm_model: str = "llm.mnn") -> list[Finding]:
    """The visual graph's outputs against the LLM graph's inputs (both CPU graphs)."""
    if not model.visual:
        return []
    vis, vwhere = _load(base, visual_model)
    llm, lwhere = _load(base, llm_model)
    out: list[Finding] = []
    for graph, where, name in ((vis, vwhere, visual_model), (llm, lwhere, llm_model)):
        # Only a graph the harness could read with the converter installed is worth a warning;
        # a file that is no MNN graph at all (or missing) is other guards' finding.
        if graph is None and "needs the converter" in where:
            out.append(shape_finding(ShapeKind.IO_UNREADABLE, rel, name, "a readable MNN graph", where,
                                    "keep the exporter's graph (or its .json) in the export folder",
                                    WARNING, source=SOURCE))
    if vis is None or llm is None:
        return out
    v, inputs = visual_outputs(vis), graph_inputs(llm)

    def add(key: str, expected: str, found: str, hint: str, file: str = visual_model) -> None:
        out.append(shape_finding(ShapeKind.CPU_GRAPH_IO, file, key, expected, found, hint, ERROR, source=SOURCE))

    embeds = inputs.get(EMBEDS_INPUT)
    hidden = model.hidden or (embeds[-1] if embeds else None)
    if v.embeds_width is not None and hidden is not None and v.embeds_width != hidden:
        add("image_embeds width", str(hidden), str(v.embeds_width),
            "the visual merger must project to the LLM's hidden size; re-export both graphs together")
    ds_in = inputs.get(DEEPSTACK_INPUT)
    if model.deepstack and v.deepstack_count == 0:
        add(ShapeKind.DEEPSTACK_FEATURE, "one feature per DeepStack layer", "absent",
            "llm_config.json has has_deepstack but the visual graph outputs no DeepStack feature")
    if v.deepstack_count and ds_in is None:
        add(DEEPSTACK_INPUT, f"[{v.deepstack_count},seq,{v.deepstack_width}]", "absent",
            "the visual graph outputs DeepStack features the LLM graph has no input for", llm_model)
    if v.deepstack_count and ds_in:
        if ds_in[0] not in (-1, v.deepstack_count):
            add(f"{DEEPSTACK_INPUT} dim 0", f"{v.deepstack_count} (visual DeepStack features)",
                fmt_shape(ds_in), "the LLM graph adds one DeepStack feature per layer; re-export both graphs",
                llm_model)
        if v.deepstack_width is not None and ds_in[-1] not in (-1, v.deepstack_width):
            add(f"{DEEPSTACK_INPUT} width", str(v.deepstack_width), fmt_shape(ds_in),
                "DeepStack feature width must equal the LLM's hidden size", llm_model)
    return out
