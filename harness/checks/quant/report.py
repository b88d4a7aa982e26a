"""What the quantization check found: per-tensor params, MLP Mul checks, findings, the report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum

from harness.findings import Finding, Severity, Where

# Kinds of integer tensors, in report order. The first five are the ones the NPU export
# bugs are usually described with; `int_derived` catches ints computed from them.
INTEGER_KINDS = ("shape_output", "rank_output", "size_output", "gather_index", "int_input",
                 "reshape_shape", "int_const", "int_derived")
INT_KIND_TEXT = {
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

    def same_as(self, other: QuantParams | None) -> bool:
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


class QuantKind(StrEnum):
    """What a quantization finding is about."""

    NO_QUANT_INFO = "no_quant_info"
    MLP_MUL_MISSING = "mlp_mul_missing"
    MLP_MUL_INHERITED = "mlp_mul_inherited"
    DOWN_PROJ_MISMATCH = "down_proj_mismatch"
    FALLBACK_TOO_NARROW = "fallback_too_narrow"  # a warning
    ROPE_MUL_MISSING = "rope_mul_missing"
    INTEGER_QUANTIZED = "integer_quantized"
    LOW_PRECISION = "low_precision"  # a warning
    COVERAGE_DROP = "coverage_drop"


def quant_finding(kind: QuantKind, severity: Severity, message: str, tensor: str | None = None,
                  layer: int | None = None) -> Finding:
    """A quantization finding (harness/findings.py): its message names the block and tensor."""
    return Finding(kind, message, severity, Where(tensor=tensor, layer=layer))


def finding_json(f: Finding) -> dict[str, object]:
    """A quantization finding as the report's JSON has always held it."""
    return {"kind": f.kind.value, "severity": f.severity.value, "message": f.message, "tensor": f.where.tensor,
            "layer": f.where.layer}


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
    scale_precision: str = "exact"   # "6 decimals" when read back through the converter

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
        return not any(f.is_error for f in self.findings)

    def mul_for_layer(self, layer: int) -> MulCheck | None:
        return next((m for m in self.mlp_muls if m.layer == layer), None)

    def to_json(self) -> dict[str, object]:
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
            "findings": [finding_json(f) for f in self.findings],
        }


def fmt_params(p: QuantParams | None) -> str:
    return "none" if p is None else f"scale {p.scale!r}, zero {p.zero:g}"
