"""The typed evidence of a localization (harness.checks.localize): one row per compared op, in graph
order, and the verdict over them. Frozen dataclasses; JSON only at the byte boundary (to_json /
from_json for the CLI's text, LocalizeEvidence for a record's extras under "localize")."""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, Tone, fmt3, json_object


class Outcome(str, enum.Enum):
    NONE = "none"  # every op at or above the threshold
    DEPARTED = "departed"  # the first op under it is named
    UNDECIDABLE = "undecidable"  # the files could not be compared (missing, damaged, nothing matched)


@dataclass(frozen=True)
class OpGap:
    """One op of the CPU reference graph against QNN's output for it."""

    index: int  # position in the reference graph (graph order)
    node: str  # the reference graph's node name, e.g. aten_mul_tensor_5
    target: str  # the op, e.g. aten.mul.Tensor
    layer: str  # the module it came from, e.g. layers.1 ("" when not known)
    sqnr_db: float
    cosine: float
    saturation: float  # share of QNN's values at the quantization bounds (0 when not quantized)
    judged: bool = True  # False: shown, not judged (why: `unjudged`)
    unjudged: str = ""


@dataclass(frozen=True)
class Localization:
    outcome: Outcome
    threshold_db: float
    format: str
    ops: tuple[OpGap, ...]  # every compared op, graph order
    first: OpGap | None = None  # the first op under the threshold
    following: tuple[OpGap, ...] = ()  # the ops after it (a few), as they compared
    reason: str = ""  # why undecidable / a one-line summary

    @property
    def worst(self) -> OpGap | None:
        judged = [o for o in self.ops if o.judged]
        return min(judged, key=lambda o: o.sqnr_db) if judged else None

    def summary(self) -> str:
        if self.outcome is Outcome.UNDECIDABLE:
            return f"undecidable: {self.reason}"
        if self.first is None:
            worst = self.worst
            low = f"; lowest {worst.node} at {worst.sqnr_db:.1f} dB" if worst else ""
            return f"no op under {self.threshold_db:g} dB SQNR ({len(self.ops)} compared{low})"
        f = self.first
        after = ", ".join(f"{o.node} {o.sqnr_db:.1f} dB" for o in self.following[:3])
        return (f"first departure: {f.node} ({f.target}, {f.layer or 'no layer'}) at {f.sqnr_db:.1f} dB SQNR, "
                f"cosine {f.cosine:.3f}, {f.saturation:.1%} of values at the quantization bounds"
                + (f"; then {after}" if after else ""))

    def as_dict(self) -> JsonObject:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Localization:
        return cls.of_dict(json.loads(text))

    @classmethod
    def of_dict(cls, data: dict[str, Any]) -> Localization:
        first = OpGap(**data["first"]) if data.get("first") else None
        return cls(outcome=Outcome(data["outcome"]), threshold_db=float(data["threshold_db"]), format=data["format"],
                   ops=tuple(OpGap(**o) for o in data["ops"]), first=first,
                   following=tuple(OpGap(**o) for o in data.get("following", ())), reason=data.get("reason", ""))


@dataclass(frozen=True)
class OpsDeparture:
    """The page's "where it departs", ExecuTorch lane: one localization and the failed cell it explains."""

    result: Localization
    cell: str = ""


@dataclass(frozen=True)
class LocalizeEvidence:
    """A record's localization: the format cell it explains (its test name) and the verdict."""

    KEY: ClassVar[str] = "localize"
    # The first departing op ("none": none departed) and its SQNR; the healthy floor: the lowest
    # judged op's SQNR, however it ended (how close a passing program runs to the line).
    COLUMNS: ClassVar[tuple[Column, ...]] = (Column("localize_first_op", "TEXT"), Column("localize_sqnr_db", "REAL"),
                                             Column("localize_floor_db", "REAL"))

    result: Localization
    cell: str = ""  # the failed cell it was run for ("" when asked for with --localize / a plan key)

    def junit(self) -> dict[str, str | None]:
        """The verdict (harness.checks.localize): the first op under the threshold and the ops after
        it; only the outcome (and why) when none departed; the lowest judged op either way."""
        r, f, low = self.result, self.result.first, self.result.worst
        props: dict[str, str | None] = {"localize": r.outcome.value, "localize_threshold_db": fmt3(r.threshold_db),
                                        "localize_format": r.format, "localize_cell": self.cell,
                                        "localize_reason": r.reason}
        if low is not None:
            props.update({"localize_floor_op": low.node, "localize_floor_db": f"{low.sqnr_db:.2f}"})
        if f is not None:
            props.update({"localize_first_op": f.node, "localize_target": f.target, "localize_layer": f.layer,
                          "localize_sqnr_db": f"{f.sqnr_db:.2f}", "localize_cosine": f"{f.cosine:.4f}",
                          "localize_saturation": f"{f.saturation:.4f}",
                          "localize_follows": ", ".join(f"{o.node} {o.sqnr_db:.1f} dB" for o in r.following)})
        return props

    def rows(self) -> tuple[Row, ...]:
        r = self.result
        tone = Tone.FAIL if r.first is not None else Tone.WARN if r.outcome is Outcome.UNDECIDABLE else Tone.PASS
        return (Row("per op against the CPU reference", r.summary(), tone, first=r.first is not None),)

    def views(self) -> tuple[object, ...]:
        return (OpsDeparture(self.result, self.cell),)

    def columns(self) -> dict[str, Cell]:
        if self.result.outcome is Outcome.UNDECIDABLE:
            return {}
        first, low = self.result.first, self.result.worst
        return {"localize_first_op": first.node if first else "none", "localize_sqnr_db": first.sqnr_db if first else None,
                "localize_floor_db": low.sqnr_db if low else None}

    def to_json(self) -> JsonObject:
        return {**self.result.as_dict(), "cell": self.cell}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "a localization")
        data = {k: v for k, v in raw.items() if k != "cell"}
        return cls(Localization.of_dict(data), str(raw.get("cell") or ""))
