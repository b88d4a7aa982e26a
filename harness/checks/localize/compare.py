"""Per-op comparison with ExecuTorch's own tools: the Inspector maps the ETDump's intermediate outputs
(the debug buffer) to the ETRecord's CPU reference graph and runs it on the representative inputs;
QNN's QcomSQNRComparator dequantizes QNN's tensors (with the encodings the exporter kept beside the
ETRecord, which a read-back ETRecord has lost) and gives SQNR. Cosine and saturation are computed
here from the same pairs. Needs the `executorch` extra; imported only by the localize check."""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any

from harness.checks.localize.layout import DEBUG_OUTPUT, ETDUMP, ETRECORD, DebugFiles
from harness.evidence import OpGap

MIN_VALUES = 16  # fewer values than this give no SQNR worth judging (one token's norm statistics)
MAX_DB = 200.0  # identical tensors give +inf SQNR; kept finite so the evidence is plain JSON


def _inject_encodings(edge_ep: Any, nodes: list[dict[str, Any]]) -> int:
    """Put QNN's quantization and layout back on the reference graph's nodes (by name)."""
    import torch
    from executorch.backends.qualcomm.utils.constants import (
        QCOM_AXIS_ORDER,
        QCOM_DTYPE,
        QCOM_QUANT_ATTRS,
        QCOM_QUANT_MAX,
        QCOM_QUANT_MIN,
        QCOM_SCALE,
        QCOM_ZERO_POINT,
    )

    by_name = {n["name"]: n for n in nodes}
    done = 0
    for node in edge_ep.graph_module.graph.nodes:
        kept = by_name.get(node.name)
        if kept is None:
            continue
        if kept.get("axis_order"):
            node.meta[QCOM_AXIS_ORDER] = tuple(kept["axis_order"])
        q = kept.get("quant")
        if q:
            node.meta[QCOM_QUANT_ATTRS] = {QCOM_SCALE: q["scale"], QCOM_ZERO_POINT: q["zero_point"],
                                           QCOM_QUANT_MIN: q["quant_min"], QCOM_QUANT_MAX: q["quant_max"],
                                           QCOM_DTYPE: getattr(torch, q["dtype"])}
            done += 1
    return done


def _saturation(reference: Any, quant: dict[str, Any] | None) -> float:
    """Share of the op's values the op's own quantization range clips: the reference value lies
    beyond a bound by more than half a step (a zero at a bound of [0, max] is not clipped)."""
    if not quant or not reference.numel():
        return 0.0
    scale, zp = quant["scale"], quant["zero_point"]
    lo, hi = (quant["quant_min"] - zp) * scale, (quant["quant_max"] - zp) * scale
    ref = reference.float()
    return float(((ref < lo - scale / 2) | (ref > hi + scale / 2)).float().mean().item())


def _cosine(a: Any, b: Any) -> float:
    import torch

    return float(torch.nn.functional.cosine_similarity(a.float().flatten(), b.float().flatten(), dim=0).item())


def _finite(db: float) -> float:
    """SQNR kept finite (+inf for identical tensors); NaN (nothing to compare) becomes -MAX_DB,
    which is never judged (`_why_unjudged`)."""
    if math.isnan(db):
        return -MAX_DB
    return max(-MAX_DB, min(MAX_DB, db))


def _short_target(target: str) -> str:
    """`aten.mul.Tensor` of an edge op's repr (`<EdgeOpOverload: aten.mul.Tensor>: schema = ...`)."""
    return target.split(">", 1)[0].removeprefix("<EdgeOpOverload: ") if target.startswith("<") else target


def _own_output_counts(inspector: Any) -> int:
    """ExecuTorch 1.5.1's Inspector gives every op inside a delegate the delegate call's output
    count (its `num_outputs` comes from the instruction), so a program whose delegate has several
    outputs (a KV cache's buffer updates) fails in calculate_numeric_gap with an IndexError. Each
    op event carries its own outputs in debug_data: count those (docs/localize.md#executorch-traps)."""
    fixed = 0
    for block in inspector.event_blocks:
        for event in block.events:
            if event.is_delegated_op and event.op_types and isinstance(event.debug_data, list):
                if event.num_outputs != len(event.debug_data):
                    event.num_outputs = len(event.debug_data)
                    fixed += 1
    return fixed


def _state_path(nodes: list[dict[str, Any]]) -> set[str]:
    """Ops that read the program's KV cache before attention masks it: from each cache write
    (index_put / index_copy) to the first softmax after it, or the product with its weights. The cache's unwritten slots hold 0 in
    the reference and QNN's raw 0 (-zero_point x scale) on the device, which the mask then removes;
    comparing them measures the slots no step wrote, not the op (docs/localize.md#what-is-judged)."""
    users: dict[str, list[str]] = {}
    for n in nodes:
        for src in n.get("inputs") or []:
            users.setdefault(src, []).append(n["name"])
    by_name = {n["name"]: n for n in nodes}
    softmax = {n["name"] for n in nodes if "softmax" in n["name"]}
    marked: set[str] = set()
    todo = [n["name"] for n in nodes if "index_put" in n["name"] or "index_copy" in n["name"]]
    while todo:
        name = todo.pop()
        # the attention's weighted sum over the value cache: the softmax's zero weights remove the
        # unwritten slots there (a one-token decode step reads the whole value cache through it)
        if name in marked or softmax.intersection(by_name.get(name, {}).get("inputs") or []):
            continue
        marked.add(name)
        if "softmax" not in name and "mask" not in str(by_name.get(name, {}).get("target", "")):
            todo.extend(users.get(name, []))
    return {m for m in marked if "softmax" not in m}


def _why_unjudged(node: dict[str, Any], sqnr: float, state: set[str]) -> str:
    if not node.get("quant"):
        return "not a quantized QNN op"
    if math.isnan(sqnr):
        return "no comparable values"
    if "_to_copy" in node["name"] or "_to_dim_order_copy" in node["name"]:
        return "a dtype cast (measured on this program: 0 dB at cosine 1.000, a scale the dump does not carry)"
    if node["name"] in state:
        return "reads the KV cache's unwritten slots (masked later)"
    values = math.prod(int(d) for d in node.get("shape") or [])
    if node.get("shape") and values < MIN_VALUES:
        return (f"{values} value(s): one number's error, not a tensor's (a one-token step's RMSNorm mean: "
                "12.6 dB beside its rsqrt's 94 dB, docs/localize.md#what-is-judged)")
    return ""


def _import_debugger() -> tuple[Any, Any, Any]:
    """ExecuTorch's Inspector, QNN's SQNR comparator and the ETRecord reader, imported without their
    side effects on the process: ExecuTorch 1.5.1's `backends/qualcomm/debugger/format_outputs.py`
    calls `logging.basicConfig(level=INFO)` at import, which would send every INFO line of a night
    (any library's) to its console; the root logger is put back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from executorch.backends.qualcomm.debugger.qcom_numerical_comparator_sample import QcomSQNRComparator
        from executorch.devtools import Inspector
        from executorch.devtools.etrecord import parse_etrecord
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    # The ETRecord's schema warns once per op kwarg it does not serialize (dim_order of clones): a
    # page of UserWarnings per comparison on a night's console, none of them about the program.
    warnings.filterwarnings("ignore", message="Unsupported kwarg encountered", category=UserWarning,
                            module=r"executorch\.devtools\.debug_format\.et_schema")
    return QcomSQNRComparator, Inspector, parse_etrecord


def compare(files: DebugFiles) -> list[OpGap]:
    """Every reference op the run dumped, with SQNR, cosine and saturation."""
    import torch

    QcomSQNRComparator, Inspector, parse_etrecord = _import_debugger()  # noqa: N806 (classes, as imported)

    encodings = files.encodings()
    reference = encodings.get("reference_graph", "edge_after_transform/forward")
    etrecord = parse_etrecord(str(files.path(ETRECORD)))
    edge_ep = etrecord.graph_map[reference]
    _inject_encodings(edge_ep, encodings["nodes"])
    inspector = Inspector(etdump_path=str(files.path(ETDUMP)), debug_buffer_path=str(files.path(DEBUG_OUTPUT)),
                          etrecord=etrecord, reference_graph_name=reference)
    _own_output_counts(inspector)
    frame = inspector.calculate_numeric_gap(distance=QcomSQNRComparator(edge_ep=edge_ep), reference_graph=reference)
    order = {n["name"]: i for i, n in enumerate(encodings["nodes"])}
    state = _state_path(encodings["nodes"])
    ops: list[OpGap] = []
    for _, row in frame.iterrows():
        names = [n for n in row["aot_ops"] if n in order]
        if not names:
            continue
        name = max(names, key=order.__getitem__)  # a fused group's output is its last op
        node = encodings["nodes"][order[name]]
        ref, got = row["aot_intermediate_output"], row["runtime_intermediate_output"]
        if not (isinstance(ref, torch.Tensor) and isinstance(got, torch.Tensor)):
            continue
        sqnr = float(row["gap"][0])
        why = _why_unjudged(node, sqnr, state)
        ops.append(OpGap(index=order[name], node=name, target=_short_target(node.get("target", "")),
                         layer=node.get("module", ""), sqnr_db=_finite(sqnr), cosine=_cosine(ref, got),
                         saturation=_saturation(ref, node.get("quant")), judged=not why, unjudged=why))
    return ops
