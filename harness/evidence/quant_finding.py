"""The static quant check's first error (harness.checks.quant): the tensor and the layer whose
activation range is wrong, as the MNN lane's "where it departs" shows it beside the ExecuTorch
lane's first op (report/departs.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from harness.evidence.base import JsonObject, json_int


@dataclass(frozen=True)
class QuantFinding:
    KEY: ClassVar[str] = "quant_finding"

    kind: str  # the finding's kind, e.g. mlp_mul_inherited
    tensor: str  # "" when the finding names no one tensor
    layer: int | None
    message: str
    errors: int = 1  # how many error findings the check made (this is the first in the graph's order)

    def to_json(self) -> JsonObject:
        return {"kind": self.kind, "tensor": self.tensor, "layer": self.layer, "message": self.message,
                "errors": self.errors}

    @classmethod
    def of_json(cls, raw: JsonObject) -> Self:
        kind, layer = raw.get("kind"), raw.get("layer")
        if not isinstance(kind, str) or not kind:
            raise ValueError("a quant finding without its kind")
        return cls(kind, str(raw.get("tensor") or ""), json_int(layer), str(raw.get("message") or ""), int(raw.get("errors") or 1))
