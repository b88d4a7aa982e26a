"""The typed evidence of a localization (harness.checks.localize): one row per compared op, in graph
order, and the verdict over them. Frozen dataclasses; JSON only at the byte boundary (to_json /
from_json for the CLI's text, LocalizeEvidence for a record's extras under "localize")."""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Self

from harness.evidence.base import JsonObject


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
class LocalizeEvidence:
    """A record's localization: the format cell it explains (its test name) and the verdict."""

    KEY: ClassVar[str] = "localize"

    result: Localization
    cell: str = ""  # the failed cell it was run for ("" when asked for with --localize / a plan key)

    def to_json(self) -> JsonObject:
        return {**self.result.as_dict(), "cell": self.cell}

    @classmethod
    def of_json(cls, raw: JsonObject) -> Self:
        data = {k: v for k, v in raw.items() if k != "cell"}
        return cls(Localization.of_dict(data), str(raw.get("cell") or ""))
