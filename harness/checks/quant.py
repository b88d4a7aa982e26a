"""Activation-quantization metadata of an MNN NPU export (`llm.mnn.json` / `extraTensorDescribe`).

MNN's smooth/omni quantizer annotates each calibrated op's input and output, then
`_propagate_quant_info` fills the rest by copying ranges between neighbours. Two faults
come out of that on real exports (docs/mnn-export-layout.md#activation-quantization):

- the MLP product `gate x up` (a BinaryOp MUL) is never calibrated: it gets the range of
  one operand, bit for bit, although the product's range is unrelated to either; and the
  down_proj conv input (the `pre_convert` tensor, calibrated) then disagrees with it;
- integer tensors (Shape/Rank/Size outputs, Gather indices, `position_ids`, Reshape shape
  inputs, int constants and ints computed from those) receive activation quantization.

`analyze(graph)` returns a `QuantReport` with those findings, the coverage numbers (so a fix
that silently drops quantization shows up) and, for each MLP Mul, the safe fallback scale
`s_a * s_b * qmax` (the product of the operands' extreme values over qmax).

CLI: `python -m harness.checks.quant FILE [--json] [--baseline FILE]`
(FILE: llm.mnn.json, llm.mnn.json.gz or llm.mnn). Exit 0 passed, 1 findings, 2 bad input.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from harness.errors import ArtifactError

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

# Kinds of integer tensors, in report order. The first five are the ones the NPU export
# bugs are usually described with; `int_derived` catches ints computed from them.
INTEGER_KINDS = ("shape_output", "rank_output", "size_output", "gather_index", "int_input",
                 "reshape_shape", "int_const", "int_derived")
_INT_KIND_TEXT = {
    "shape_output": "Shape outputs", "rank_output": "Rank outputs", "size_output": "Size outputs",
    "gather_index": "Gather index inputs", "int_input": "integer graph inputs (position_ids...)",
    "reshape_shape": "Reshape shape inputs", "int_const": "integer constants",
    "int_derived": "other integer tensors (computed from the above)",
}


@dataclass(frozen=True)
class QuantParams:
    """One `quantInfo`: real = (q + zero) * scale for the 16-bit NPU encoding."""

    scale: float
    zero: float
    qmin: float
    qmax: float
    dtype: str

    def same_as(self, other: "QuantParams | None") -> bool:
        return other is not None and self.scale == other.scale and self.zero == other.zero

    @property
    def span(self) -> float:
        """2^bits - 1 (max - min + 1 with the exporter's symmetric min/max fields)."""
        return self.qmax - self.qmin + 1

    def real_range(self) -> tuple[float, float]:
        """Real values the encoding covers: the exporter sets scale = (max - min) / (2^bits - 1) and
        zero = round(min / scale), QNN reads code q in [0, 2^bits - 1] as (q + zero) * scale."""
        return self.zero * self.scale, (self.zero + self.span) * self.scale


@dataclass(frozen=True)
class Hop:
    """A tensor on the way from the MLP Mul output to the down_proj conv input."""

    tensor: str
    producer: str            # op type that wrote the tensor
    params: QuantParams | None


@dataclass(frozen=True)
class MulCheck:
    """One MLP `gate x up` multiply and what its quantization looks like."""

    layer: int | None
    op: str
    output: str
    inputs: tuple[str, ...]
    output_params: QuantParams | None
    input_params: tuple[QuantParams | None, ...]
    inherited_from: str | None   # operand whose (scale, zero) the output copies exactly
    fallback_scale: float | None  # s_a * s_b * qmax: the quick range for an uncalibrated product
    derived_min: float | None     # product of the operands' real ranges (interval arithmetic)...
    derived_max: float | None
    derived_scale: float | None   # ...encoded like the exporter: (max - min) / (2^bits - 1)
    derived_zero: float | None    # round(min / scale), the generate_for_npu 16-bit convention
    down_proj: str | None         # conv the product feeds
    hops: tuple[Hop, ...]         # Mul output ... conv input
    down_proj_agrees: bool | None  # None when no down_proj was found

    @property
    def has_params(self) -> bool:
        return self.output_params is not None


@dataclass(frozen=True)
class Finding:
    kind: str        # mlp_mul_inherited, mlp_mul_missing, down_proj_mismatch, integer_quantized,
                     # rope_mul_missing, no_quant_info, coverage_drop, low_precision (warning)
    severity: str    # "error" fails the check, "warning" does not
    message: str
    tensor: str | None = None
    layer: int | None = None


@dataclass(frozen=True)
class IntegerKindCount:
    total: int
    quantized: int
    examples: tuple[str, ...]   # a few quantized tensor names


@dataclass
class QuantReport:
    source: str
    total_tensors: int
    quantized_tensors: int
    float_tensors: int
    float_tensors_quantized: int
    mlp_muls: list[MulCheck]
    rope_mul_total: int
    rope_mul_with_params: int
    integer_tensors_total: int
    integer_tensors_quantized: int
    integer_by_kind: dict[str, IntegerKindCount]
    findings: list[Finding] = field(default_factory=list)
    scale_precision: str = "exact"   # "6 decimals" when read back through mnnconvert

    @property
    def mlp_mul_total(self) -> int:
        return len(self.mlp_muls)

    @property
    def mlp_mul_with_params(self) -> int:
        return sum(m.has_params for m in self.mlp_muls)

    @property
    def mlp_mul_inherited(self) -> int:
        return sum(m.inherited_from is not None for m in self.mlp_muls)

    @property
    def mlp_mul_missing(self) -> int:
        return sum(not m.has_params for m in self.mlp_muls)

    @property
    def down_proj_mismatch(self) -> int:
        return sum(m.down_proj_agrees is False for m in self.mlp_muls)

    @property
    def passed(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def mul_for_layer(self, layer: int) -> MulCheck | None:
        return next((m for m in self.mlp_muls if m.layer == layer), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "passed": self.passed,
            "total_tensors": self.total_tensors,
            "quantized_tensors": self.quantized_tensors,
            "mlp_mul_total": self.mlp_mul_total,
            "mlp_mul_inherited": self.mlp_mul_inherited,
            "mlp_mul_missing": self.mlp_mul_missing,
            "mlp_mul_with_params": self.mlp_mul_with_params,
            "down_proj_mismatch": self.down_proj_mismatch,
            "integer_tensors_total": self.integer_tensors_total,
            "integer_tensors_quantized": self.integer_tensors_quantized,
            "integer_by_kind": {k: asdict(v) for k, v in self.integer_by_kind.items()},
            "coverage": {
                "quantized_tensors": self.quantized_tensors,
                "total_tensors": self.total_tensors,
                "float_tensors_quantized": self.float_tensors_quantized,
                "float_tensors": self.float_tensors,
                "mlp_mul_with_params": self.mlp_mul_with_params,
                "mlp_mul_total": self.mlp_mul_total,
                "rope_mul_with_params": self.rope_mul_with_params,
                "rope_mul_total": self.rope_mul_total,
            },
            "scale_precision": self.scale_precision,
            "mlp_muls": [asdict(m) for m in self.mlp_muls],
            "findings": [asdict(f) for f in self.findings],
        }


# ----------------------------------------------------------------------------- loading

def load_graph_json(path: Path | str) -> dict[str, Any]:
    """Read an MNN graph as JSON: `.json`, `.json.gz`, or `.mnn` (dumped with the mnn
    package's converter). Raises ArtifactError naming the file on any problem."""
    path = Path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise ArtifactError(f"{path}: {what} (expected llm.mnn.json, llm.mnn.json.gz or llm.mnn)")
    if path.suffix == ".mnn":
        return _dump_mnn(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        graph = json.loads(raw)
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path}: not a readable MNN graph JSON ({exc}); regenerate it with "
                            f"`mnnconvert -f MNN --modelFile llm.mnn --JsonFile llm.mnn.json`") from None
    _validate(graph, path)
    return graph


def _dump_mnn(path: Path) -> dict[str, Any]:
    # The converter is called through `_tools` directly: the `mnnconvert` console script's
    # wrapper pip-installs a telemetry SDK (aliyun-log) on first use.
    script = "import sys, _tools; _tools.mnnconvert(['mnnconvert', '-f', 'MNN', '--modelFile', sys.argv[1], '--JsonFile', sys.argv[2]])"
    with tempfile.TemporaryDirectory(prefix="quant-json-") as tmp:
        out = Path(tmp) / "llm.mnn.json"
        try:
            proc = subprocess.run([sys.executable, "-c", script, str(path), str(out)],
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise ArtifactError(f"{path}: dumping it to JSON took over 300 s; dump it yourself with "
                                f"`mnnconvert -f MNN --modelFile {path} --JsonFile llm.mnn.json`") from None
        if "No module named '_tools'" in proc.stderr:
            raise ArtifactError(f"{path}: reading an .mnn file needs the converter from the `mnn` "
                                f"package (pip install 'harness[mnn]'), or pass llm.mnn.json instead")
        try:   # the converter exits 0 even when it fails, and may leave an empty file
            graph = json.loads(out.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            detail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            raise ArtifactError(f"{path}: mnnconvert could not dump it to JSON ({detail[0]}); "
                                f"is it an MNN model file?") from None
    _validate(graph, path)
    graph["_harness_scale_precision"] = "6 decimals"   # the dump prints floats with %f
    return graph


def _validate(graph: Any, path: Path) -> None:
    if not isinstance(graph, dict) or not isinstance(graph.get("oplists"), list) \
            or not isinstance(graph.get("tensorName"), list):
        raise ArtifactError(f"{path}: JSON has no `oplists`/`tensorName`: not an MNN graph dump")


# ----------------------------------------------------------------------------- analysis

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


def _op_kind(op: dict[str, Any]) -> str:
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
        main = op.get("main") if isinstance(op.get("main"), dict) else {}
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


def _is_mul(op: dict[str, Any]) -> bool:
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
    if len(in_p) == 2 and in_p[0] is not None and in_p[1] is not None:
        a, b = in_p
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


def _fmt(p: QuantParams | None) -> str:
    return "none" if p is None else f"scale {p.scale!r}, zero {p.zero:g}"


def analyze(graph: dict[str, Any], source: str = "<graph>") -> QuantReport:
    """Check one parsed MNN graph JSON. Never raises for a graph `load_graph_json` accepted."""
    g = _index(graph)
    findings: list[Finding] = []
    if not g.params:
        findings.append(Finding("no_quant_info", "error",
                                f"{source}: no `extraTensorDescribe` quantInfo at all: the export has no "
                                f"activation quantization (export with --smooth or --omni and --act_bit for NPU)"))

    mlp = [_check_mul(g, op) for op in g.ops if _is_mlp_mul(g, op)]
    mlp.sort(key=lambda m: (m.layer if m.layer is not None else 1 << 30, m.op))
    for m in mlp:
        where = f"layer {m.layer}" if m.layer is not None else m.op
        fb = ""
        if m.fallback_scale is not None:
            fb = f"; fallback s_a*s_b*qmax = {m.fallback_scale:.6g}"
            if m.derived_scale is not None:
                fb += (f" (operand ranges give [{m.derived_min:.4g}, {m.derived_max:.4g}], "
                       f"scale {m.derived_scale:.6g}, zero {m.derived_zero:g})")
        if m.output_params is None:
            findings.append(Finding("mlp_mul_missing", "error",
                                    f"{where}: MLP Mul output {m.output} has no quantInfo: the calibrator never saw "
                                    f"it and nothing propagated{fb}", m.output, m.layer))
        elif m.inherited_from is not None:
            findings.append(Finding("mlp_mul_inherited", "error",
                                    f"{where}: MLP Mul output {m.output} ({_fmt(m.output_params)}) is bit-identical to "
                                    f"its input {m.inherited_from}: copied from an operand, not calibrated{fb}",
                                    m.output, m.layer))
        if m.down_proj_agrees is False and m.output_params is not None:
            bad = next(h for h in m.hops[1:] if not m.output_params.same_as(h.params))
            findings.append(Finding("down_proj_mismatch", "error",
                                    f"{where}: {m.down_proj} input disagrees with the Mul output {m.output} "
                                    f"({_fmt(m.output_params)}): {bad.tensor} after {bad.producer} has "
                                    f"{_fmt(bad.params)}", bad.tensor, m.layer))

        calibrated = m.hops[-1].params if m.down_proj is not None else None
        if m.fallback_scale is not None and m.derived_scale is not None and calibrated is not None \
                and m.fallback_scale < calibrated.scale and (m.inherited_from is not None or m.output_params is None):
            # s_a*s_b*qmax assumes symmetric operands; with zero offsets it can fall short.
            findings.append(Finding("fallback_too_narrow", "warning",
                                    f"{where}: s_a*s_b*qmax = {m.fallback_scale:.6g} is below the calibrated "
                                    f"{m.down_proj} input scale {calibrated.scale:.6g}: it would clip; use the "
                                    f"operand-range scale {m.derived_scale:.6g} or the calibrated one",
                                    m.output, m.layer))

    rope = [op for op in g.ops if _is_rope_mul(g, op)]
    rope_with = [op for op in rope if op["outputIndexes"][0] in g.params]
    if g.params and len(rope_with) < len(rope):
        missing = [g.name(op["outputIndexes"][0]) for op in rope if op not in rope_with]
        findings.append(Finding("rope_mul_missing", "error",
                                f"{len(missing)} of {len(rope)} RoPE multiplies carry no quantInfo "
                                f"(e.g. {', '.join(missing[:3])}): quantization coverage dropped", missing[0]))

    kinds = _integer_tensors_indexed(g)
    by_kind: dict[str, IntegerKindCount] = {}
    for k in INTEGER_KINDS:
        q = sorted(i for i in kinds[k] if i in g.params)
        by_kind[k] = IntegerKindCount(len(kinds[k]), len(q), tuple(g.name(i) for i in q[:3]))
        if q:
            findings.append(Finding("integer_quantized", "error",
                                    f"{len(q)} of {len(kinds[k])} {_INT_KIND_TEXT[k]} carry activation "
                                    f"quantization (e.g. {', '.join(g.name(i) for i in q[:3])}): integer "
                                    f"tensors must stay unquantized", g.name(q[0])))
    all_int = set().union(*kinds.values())
    int_quant = sum(i in g.params for i in all_int)

    precision = str(graph.get("_harness_scale_precision", "exact"))
    if precision != "exact":
        findings.append(Finding("low_precision", "warning",
                                f"{source}: scales were read back through mnnconvert, which prints 6 decimals; "
                                f"'bit-identical' means identical to 6 decimals here. Use llm.mnn.json from the "
                                f"export folder for exact values."))

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
            out.append(Finding("coverage_drop", "error",
                               f"{report.source}: {what} dropped from {before} ({baseline.source}) to {now}"))
    return out


def assert_quant_ok(report: QuantReport, per_kind: int = 5) -> None:
    """pytest helper: raise AssertionError summarising every failing finding by kind
    (counts first, then up to `per_kind` messages of each kind)."""
    errors = [f for f in report.findings if f.severity == "error"]
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
                            f"regenerate it from llm.mnn with mnnconvert") from None


# ----------------------------------------------------------------------------- CLI

def render(report: QuantReport) -> str:
    lines = [f"quantization metadata: {report.source}",
             f"  tensors with quantInfo: {report.quantized_tensors} of {report.total_tensors} "
             f"(float: {report.float_tensors_quantized} of {report.float_tensors})",
             f"  MLP Mul (gate x up): {report.mlp_mul_total} found, {report.mlp_mul_with_params} with quantInfo, "
             f"{report.mlp_mul_inherited} inherited from an operand, {report.down_proj_mismatch} disagree with "
             f"their down_proj input",
             f"  RoPE multiplies with quantInfo: {report.rope_mul_with_params} of {report.rope_mul_total}",
             f"  integer tensors quantized: {report.integer_tensors_quantized} of {report.integer_tensors_total}"]
    for k, c in report.integer_by_kind.items():
        if c.total:
            lines.append(f"    {_INT_KIND_TEXT[k]}: {c.quantized} of {c.total}")
    example = next((m for m in report.mlp_muls if m.inherited_from or m.down_proj_agrees is False), None)
    if example is not None:
        lines.append(f"  example, layer {example.layer}: {example.output} {_fmt(example.output_params)}"
                     + (f" = {example.inherited_from}" if example.inherited_from else ""))
        for h in example.hops[1:]:
            lines.append(f"    -> {h.tensor} ({h.producer}) {_fmt(h.params)}")
        if example.fallback_scale is not None:
            lines.append(f"    fallback s_a*s_b*qmax = {example.fallback_scale!r}; operand ranges give "
                         f"[{example.derived_min:.4g}, {example.derived_max:.4g}] -> scale {example.derived_scale!r}")
    errors = [f for f in report.findings if f.severity == "error"]
    warnings = [f for f in report.findings if f.severity != "error"]
    for f in warnings:
        lines.append(f"  warning: {f.message}")
    if errors:
        lines.append(f"FAILED: {len(errors)} finding(s)")
        lines += [f"  - [{f.kind}] {f.message}" for f in errors]
    else:
        lines.append("PASSED")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.checks.quant",
        description="Check the activation-quantization metadata (extraTensorDescribe) of an MNN NPU export.")
    parser.add_argument("file", type=Path, help="llm.mnn.json, llm.mnn.json.gz or llm.mnn")
    parser.add_argument("--json", action="store_true", help="print one JSON object and nothing else")
    parser.add_argument("--baseline", type=Path, help="another graph to compare coverage with (e.g. before a fix)")
    args = parser.parse_args(argv)
    try:
        report = check_file(args.file)
        if args.baseline is not None:
            report.findings.extend(compare_coverage(report, check_file(args.baseline)))
    except ArtifactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print(render(report))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
