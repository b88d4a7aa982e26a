"""A generated text's agreement with the reference pair's text for the same prompt
(harness.checks.agreement, judged by the pipeline): the similarity, its level and the reference
text, and its first changes (what the reference says, what this text says instead)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, Tone, fmt3, json_object, json_texts
from harness.evidence.teacher_forced import Agreement

_TONE = {Agreement.AGREE: Tone.PASS, Agreement.DRIFT: Tone.WARN, Agreement.DISAGREE: Tone.FAIL, Agreement.ERROR: Tone.FAIL}


@dataclass(frozen=True)
class TextAgreement:
    KEY: ClassVar[str] = "agreement"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    similarity: float
    level: Agreement  # harness.checks.agreement's word for the similarity
    reference: str  # the reference pair's text
    changes: tuple[tuple[str, str], ...] = ()  # the first changes: the reference's words, this text's instead

    def junit(self) -> dict[str, str | None]:
        return {"agreement": self.level.value, "agreement_similarity": fmt3(self.similarity),
                "agreement_reference": self.reference}

    def rows(self) -> tuple[Row, ...]:
        return (Row("text vs the reference pair", f"{self.level.value}, similarity {self.similarity:.2f}",
                    _TONE[self.level]),)

    def views(self) -> tuple[object, ...]:
        return ()

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return {"similarity": self.similarity, "level": self.level.value, "reference": self.reference,
                "changes": [list(c) for c in self.changes]}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "a text agreement")
        similarity, level = raw["similarity"], raw["level"]
        if isinstance(similarity, bool) or not isinstance(similarity, int | float) or not isinstance(level, str):
            raise ValueError("a text agreement without its similarity or level")
        changes = raw.get("changes") or []
        if not isinstance(changes, list):
            raise ValueError("a text agreement's changes is not a list")
        pairs = tuple(json_texts(c, "a text agreement's change") for c in changes)
        if any(len(p) != 2 for p in pairs):
            raise ValueError("a text agreement's change is not a pair of texts")
        return cls(float(similarity), Agreement(level), str(raw.get("reference") or ""), tuple((a, b) for a, b in pairs))
