"""The static quant check's first error (harness.checks.quant): the tensor and the layer whose
activation range is wrong, as the MNN lane's "where it departs" shows it beside the ExecuTorch
lane's first op (report/departs.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, json_int, json_object, text_of


@dataclass(frozen=True)
class QuantDeparture:
    """The page's "where it departs", MNN lane: the first wrong activation range."""

    kind: str
    tensor: str
    layer: int | None
    message: str
    errors: int


@dataclass(frozen=True)
class QuantFinding:
    KEY: ClassVar[str] = "quant_finding"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    kind: str  # the finding's kind, e.g. mlp_mul_inherited
    tensor: str  # "" when the finding names no one tensor
    layer: int | None
    message: str
    errors: int = 1  # how many error findings the check made (this is the first in the graph's order)

    def junit(self) -> dict[str, str | None]:
        return {"quant_finding": self.kind, "quant_finding_tensor": self.tensor or None,
                "quant_finding_layer": text_of(self.layer), "quant_finding_errors": str(self.errors)}

    def rows(self) -> tuple[Row, ...]:
        return ()  # the MNN lane of "where it departs": its view

    def views(self) -> tuple[object, ...]:
        return (QuantDeparture(self.kind, self.tensor, self.layer, self.message, self.errors),)

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return {"kind": self.kind, "tensor": self.tensor, "layer": self.layer, "message": self.message,
                "errors": self.errors}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "a quant finding")
        kind, layer = raw.get("kind"), raw.get("layer")
        if not isinstance(kind, str) or not kind:
            raise ValueError("a quant finding without its kind")
        return cls(kind, str(raw.get("tensor") or ""), json_int(layer), str(raw.get("message") or ""), int(raw.get("errors") or 1))
