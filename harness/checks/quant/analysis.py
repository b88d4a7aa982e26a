"""The checks on a parsed graph: integer tensors, MLP Mul ranges, coverage (see the package doc)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checks.quant.report import (
    INT_KIND_TEXT,
    INTEGER_KINDS,
    Hop,
    IntegerKindCount,
    MulCheck,
    QuantKind,
    QuantParams,
    QuantReport,
    fmt_params,
    quant_finding,
)
from harness.errors import ArtifactError
from harness.findings import Finding, Severity
from harness.mnn_graph import load_graph_json

ERROR, WARNING = Severity.ERROR, Severity.WARNING
# Ops whose output is the same tensor data (layout/shape only): the down_proj walk crosses them.
_PASS_THROUGH = ("Reshape", "ConvertTensor")
# Ops that keep an integer input integer (data input = inputIndexes[0]).
_INT_PRESERVING = ("Unsqueeze", "Squeeze", "StridedSlice", "Slice", "Reshape", "GatherV2",
                   "Gather", "ConvertTensor", "Transpose", "Permute", "Flatten", "Tile",
                   "BroadcastTo", "ExpandDims")
# Ops whose output is integer only when every input is (Concat of ints, int arithmetic).
_INT_IF_ALL = ("Concat", "Pack", "BinaryOp", "Eltwise")
_INT_DTYPES = frozenset({"DT_INT32", "DT_INT64", "DT_INT16", "DT_INT8", "DT_UINT8", "DT_BOOL"})
_LAYER_RE = re.compile(r"(?:blocks|layers)\.(\d+)/")


@dataclass
class _Graph:
    names: list[str]
    ops: list[dict[str, Any]]
    params: dict[int, QuantParams]
    producer: dict[int, dict[str, Any]]
    consumers: dict[int, list[dict[str, Any]]]

    def name(self, idx: int) -> str:
        return self.names[idx] if 0 <= idx < len(self.names) else f"#{idx}"


def _index(graph: dict[str, Any]) -> _Graph:
    names = [str(n) for n in graph["tensorName"]]
    params: dict[int, QuantParams] = {}
    for entry in graph.get("extraTensorDescribe") or []:
        qi = entry.get("quantInfo") if isinstance(entry, dict) else None
        if not isinstance(qi, dict) or "index" not in entry or "scale" not in qi:
            continue
        params.setdefault(int(entry["index"]), QuantParams(
            scale=float(qi["scale"]), zero=float(qi.get("zero", 0.0)),
            qmin=float(qi.get("min", -128)), qmax=float(qi.get("max", 127)),
            dtype=str(qi.get("type", ""))))
    producer: dict[int, dict[str, Any]] = {}
    consumers: dict[int, list[dict[str, Any]]] = {}
    ops = [o for o in graph["oplists"] if isinstance(o, dict)]
    for op in ops:
        for i in op.get("outputIndexes") or []:
            producer[i] = op
        for i in op.get("inputIndexes") or []:
            consumers.setdefault(i, []).append(op)
    return _Graph(names, ops, params, producer, consumers)


def _op_kind(op: Mapping[str, object]) -> str:
    main = op.get("main")
    return str(main.get("opType", "")) if isinstance(main, dict) else ""


def _layer(*texts: str) -> int | None:
    for text in texts:
        m = _LAYER_RE.search(text)
        if m:
            return int(m.group(1))
    return None


def _integer_tensors_indexed(g: _Graph) -> dict[str, set[int]]:
    """Integer tensors by kind. Op dtype fields are unreliable in these dumps (an int MOD is
    typed DT_FLOAT), so ints are found from their sources and followed forward."""
    kinds: dict[str, set[int]] = {k: set() for k in INTEGER_KINDS}
    is_int: set[int] = set()
    for op in g.ops:   # oplists are in topological order
        t = op.get("type")
        ins = list(op.get("inputIndexes") or [])
        outs = list(op.get("outputIndexes") or [])
        raw_main = op.get("main")
        main: dict[str, object] = raw_main if isinstance(raw_main, dict) else {}
        if t in ("Shape", "Rank", "Size"):
            kinds[f"{t.lower()}_output"].update(outs)
            is_int.update(outs)
        elif t == "Input" and (main.get("dtype") in _INT_DTYPES or "position_ids" in op.get("name", "")):
            kinds["int_input"].update(outs)
            is_int.update(outs)
        elif t == "Const" and main.get("dataType") in _INT_DTYPES:
            kinds["int_const"].update(outs)
            is_int.update(outs)
        elif t == "Cast":
            if main.get("dstT") in _INT_DTYPES:
                is_int.update(outs)
        elif t in _INT_PRESERVING and ins and ins[0] in is_int:
            is_int.update(outs)
        elif t in _INT_IF_ALL and ins and all(i in is_int for i in ins):
            is_int.update(outs)
        if t in ("GatherV2", "Gather", "GatherND") and len(ins) > 1:
            kinds["gather_index"].add(ins[1])
            is_int.add(ins[1])
        if t == "Reshape" and len(ins) > 1:
            kinds["reshape_shape"].add(ins[1])
            is_int.add(ins[1])
    named = set().union(*(kinds[k] for k in INTEGER_KINDS if k != "int_derived"))
    kinds["int_derived"] = is_int - named
    return kinds


def integer_tensors(graph: dict[str, Any]) -> dict[str, set[int]]:
    """Tensor indices of the integer tensors of a parsed graph, by kind (see INTEGER_KINDS)."""
    return _integer_tensors_indexed(_index(graph))


def _walk_to_down_proj(g: _Graph, start: int) -> tuple[str | None, list[int]]:
    """Follow the Mul output through Reshape/ConvertTensor to the conv it feeds."""
    chain = [start]
    cur = start
    for _ in range(8):
        users = [op for op in g.consumers.get(cur, []) if (op.get("inputIndexes") or [None])[0] == cur]
        if len(users) != 1:
            return None, chain
        op = users[0]
        if op.get("type") == "Convolution":
            return str(op.get("name", "")), chain
        if op.get("type") not in _PASS_THROUGH or not op.get("outputIndexes"):
            return None, chain
        cur = op["outputIndexes"][0]
        chain.append(cur)
    return None, chain


def _is_mul(op: Mapping[str, object]) -> bool:
    return op.get("type") == "BinaryOp" and _op_kind(op) == "MUL"


def _check_mul(g: _Graph, op: dict[str, Any]) -> MulCheck:
    out = op["outputIndexes"][0]
    ins = list(op.get("inputIndexes") or [])
    out_p = g.params.get(out)
    in_p = tuple(g.params.get(i) for i in ins)
    inherited = None
    if out_p is not None:
        inherited = next((g.name(i) for i, p in zip(ins, in_p) if out_p.same_as(p)), None)
    fallback = d_min = d_max = d_scale = d_zero = None
    a, b = in_p if len(in_p) == 2 else (None, None)
    if a is not None and b is not None:
        fallback = a.scale * b.scale * max(abs(a.qmax), abs(b.qmax))
        (a0, a1), (b0, b1) = a.real_range(), b.real_range()
        corners = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        d_min, d_max = min(0.0, *corners), max(0.0, *corners)
        if d_max > d_min:
            d_scale = (d_max - d_min) / max(a.span, b.span)
            d_zero = float(round(d_min / d_scale))
    conv, chain = _walk_to_down_proj(g, out)
    hops = tuple(Hop(g.name(i), str(g.producer.get(i, {}).get("type", "")), g.params.get(i)) for i in chain)
    agrees = None
    if conv is not None:
        first = hops[0].params
        agrees = first is not None and all(first.same_as(h.params) for h in hops[1:])
    return MulCheck(layer=_layer(str(op.get("name", "")), g.name(out)), op=str(op.get("name", "")),
                    output=g.name(out), inputs=tuple(g.name(i) for i in ins), output_params=out_p,
                    input_params=in_p, inherited_from=inherited, fallback_scale=fallback,
                    derived_min=d_min, derived_max=d_max, derived_scale=d_scale, derived_zero=d_zero,
                    down_proj=conv, hops=hops, down_proj_agrees=agrees)


def _is_mlp_mul(g: _Graph, op: dict[str, Any]) -> bool:
    if not _is_mul(op) or not op.get("outputIndexes"):
        return False
    text = f"{op.get('name', '')} {g.name(op['outputIndexes'][0])}"
    if "act_fn" in text:   # SiLU decomposed as x * sigmoid(x): not the gate x up product
        return False
    if "/mlp/" in text and _layer(text) is not None:
        return True
    conv, _ = _walk_to_down_proj(g, op["outputIndexes"][0])
    return conv is not None and "down_proj" in conv


def _is_rope_mul(g: _Graph, op: dict[str, Any]) -> bool:
    if not _is_mul(op) or not op.get("outputIndexes"):
        return False
    text = f"{op.get('name', '')} {g.name(op['outputIndexes'][0])}"
    return _layer(text) is not None and ("/self_attn/" in text or "/attn/" in text)


def _mul_findings(m: MulCheck) -> list[Finding]:
    """One MLP Mul's findings: no quantInfo, copied from an operand, a down_proj input that
    disagrees, a fallback scale that would clip."""
    where = f"layer {m.layer}" if m.layer is not None else m.op
    out: list[Finding] = []
    fb = ""
    if m.fallback_scale is not None:
        fb = f"; fallback s_a*s_b*qmax = {m.fallback_scale:.6g}"
        if m.derived_scale is not None:
            fb += (f" (operand ranges give [{m.derived_min:.4g}, {m.derived_max:.4g}], "
                   f"scale {m.derived_scale:.6g}, zero {m.derived_zero:g})")
    if m.output_params is None:
        out.append(quant_finding(QuantKind.MLP_MUL_MISSING, ERROR,
                                 f"{where}: MLP Mul output {m.output} has no quantInfo: the calibrator never saw "
                                 f"it and nothing propagated{fb}", m.output, m.layer))
    elif m.inherited_from is not None:
        out.append(quant_finding(QuantKind.MLP_MUL_INHERITED, ERROR,
                                 f"{where}: MLP Mul output {m.output} ({fmt_params(m.output_params)}) is bit-identical "
                                 f"to its input {m.inherited_from}: copied from an operand, not calibrated{fb}",
                                 m.output, m.layer))
    if m.down_proj_agrees is False and m.output_params is not None:
        bad = next(h for h in m.hops[1:] if not m.output_params.same_as(h.params))
        out.append(quant_finding(QuantKind.DOWN_PROJ_MISMATCH, ERROR,
                                 f"{where}: {m.down_proj} input disagrees with the Mul output {m.output} "
                                 f"({fmt_params(m.output_params)}): {bad.tensor} after {bad.producer} has "
                                 f"{fmt_params(bad.params)}", bad.tensor, m.layer))
    calibrated = m.hops[-1].params if m.down_proj is not None else None
    if m.fallback_scale is not None and m.derived_scale is not None and calibrated is not None \
            and m.fallback_scale < calibrated.scale and (m.inherited_from is not None or m.output_params is None):
        # s_a*s_b*qmax assumes symmetric operands; with zero offsets it can fall short.
        out.append(quant_finding(QuantKind.FALLBACK_TOO_NARROW, WARNING,
                                 f"{where}: s_a*s_b*qmax = {m.fallback_scale:.6g} is below the calibrated "
                                 f"{m.down_proj} input scale {calibrated.scale:.6g}: it would clip; use the "
                                 f"operand-range scale {m.derived_scale:.6g} or the calibrated one",
                                 m.output, m.layer))
    return out


def _integer_findings(g: _Graph, kinds: dict[str, set[int]]) -> tuple[dict[str, IntegerKindCount], list[Finding]]:
    """Per integer kind, its count and quantized examples, and a finding for each kind that is quantized."""
    by_kind: dict[str, IntegerKindCount] = {}
    out: list[Finding] = []
    for k in INTEGER_KINDS:
        q = sorted(i for i in kinds[k] if i in g.params)
        by_kind[k] = IntegerKindCount(len(kinds[k]), len(q), tuple(g.name(i) for i in q[:3]))
        if q:
            out.append(quant_finding(QuantKind.INTEGER_QUANTIZED, ERROR,
                                     f"{len(q)} of {len(kinds[k])} {INT_KIND_TEXT[k]} carry activation "
                                     f"quantization (e.g. {', '.join(g.name(i) for i in q[:3])}): integer "
                                     f"tensors must stay unquantized", g.name(q[0])))
    return by_kind, out


def analyze(graph: dict[str, Any], source: str = "<graph>") -> QuantReport:
    """Check one parsed MNN graph JSON. Never raises for a graph `load_graph_json` accepted."""
    g = _index(graph)
    findings: list[Finding] = []
    if not g.params:
        findings.append(quant_finding(QuantKind.NO_QUANT_INFO, ERROR,
                                      f"{source}: no `extraTensorDescribe` quantInfo at all: the export has no "
                                      f"activation quantization (export with --smooth or --omni and --act_bit for NPU)"))
    mlp = [_check_mul(g, op) for op in g.ops if _is_mlp_mul(g, op)]
    mlp.sort(key=lambda m: (m.layer if m.layer is not None else 1 << 30, m.op))
    for m in mlp:
        findings += _mul_findings(m)

    rope = [op for op in g.ops if _is_rope_mul(g, op)]
    rope_with = [op for op in rope if op["outputIndexes"][0] in g.params]
    if g.params and len(rope_with) < len(rope):
        missing = [g.name(op["outputIndexes"][0]) for op in rope if op not in rope_with]
        findings.append(quant_finding(QuantKind.ROPE_MUL_MISSING, ERROR,
                                      f"{len(missing)} of {len(rope)} RoPE multiplies carry no quantInfo "
                                      f"(e.g. {', '.join(missing[:3])}): quantization coverage dropped", missing[0]))

    kinds = _integer_tensors_indexed(g)
    by_kind, integer = _integer_findings(g, kinds)
    findings += integer
    all_int = set().union(*kinds.values())
    int_quant = sum(i in g.params for i in all_int)

    precision = str(graph.get("_harness_scale_precision", "exact"))
    if precision != "exact":
        findings.append(quant_finding(QuantKind.LOW_PRECISION, WARNING,
                                      f"{source}: scales were read back through the mnn package's converter, which "
                                      f"prints 6 decimals; 'bit-identical' means identical to 6 decimals here. Use "
                                      f"llm.mnn.json from the export folder for exact values."))

    total = len(g.names)
    quantized = sum(1 for i in g.params if 0 <= i < total)
    return QuantReport(
        source=source, total_tensors=total, quantized_tensors=quantized,
        float_tensors=total - len(all_int), float_tensors_quantized=quantized - int_quant,
        mlp_muls=mlp, rope_mul_total=len(rope), rope_mul_with_params=len(rope_with),
        integer_tensors_total=len(all_int), integer_tensors_quantized=int_quant,
        integer_by_kind=by_kind, findings=findings, scale_precision=precision)


def compare_coverage(report: QuantReport, baseline: QuantReport) -> list[Finding]:
    """Coverage lost against a baseline export (e.g. the graph before a fix). Integer tensors
    losing their quantInfo is the intended fix, so float tensors and Mul ops are compared."""
    out: list[Finding] = []
    pairs = (("float tensors with quantInfo", report.float_tensors_quantized, baseline.float_tensors_quantized),
             ("MLP Mul ops with quantInfo", report.mlp_mul_with_params, baseline.mlp_mul_with_params),
             ("RoPE multiplies with quantInfo", report.rope_mul_with_params, baseline.rope_mul_with_params))
    for what, now, before in pairs:
        if now < before:
            out.append(quant_finding(QuantKind.COVERAGE_DROP, ERROR,
                                     f"{report.source}: {what} dropped from {before} ({baseline.source}) to {now}"))
    return out


def assert_quant_ok(report: QuantReport, per_kind: int = 5) -> None:
    """pytest helper: raise AssertionError summarising every failing finding by kind
    (counts first, then up to `per_kind` messages of each kind)."""
    errors = [f for f in report.findings if f.is_error]
    if not errors:
        return
    by_kind: dict[str, list[Finding]] = {}
    for f in errors:
        by_kind.setdefault(f.kind, []).append(f)
    counts = ", ".join(f"{len(v)} {k}" for k, v in by_kind.items())
    lines = [f"quantization metadata of {report.source} has {len(errors)} problem(s): {counts}"]
    for kind, items in by_kind.items():
        lines += [f"  - [{kind}] {f.message}" for f in items[:per_kind]]
        if len(items) > per_kind:
            lines.append(f"  - [{kind}] ... and {len(items) - per_kind} more like these")
    raise AssertionError("\n".join(lines))


def check_file(path: Path | str) -> QuantReport:
    """load_graph_json + analyze; a structurally broken graph becomes an ArtifactError."""
    graph = load_graph_json(path)
    try:
        return analyze(graph, source=str(path))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ArtifactError(f"{path}: malformed MNN graph JSON ({type(exc).__name__}: {exc}); "
                            f"regenerate it from llm.mnn: `python -m harness.mnn_graph llm.mnn llm.mnn.json`") from None
