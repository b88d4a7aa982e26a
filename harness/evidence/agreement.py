"""A generated text's agreement with the reference pair's text for the same prompt
(harness.checks.agreement, judged by the pipeline): the similarity, its level and the reference
text; the first changes as written kept for the record's JSON line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, Tone, fmt3, json_object
from harness.evidence.teacher_forced import Agreement

_TONE = {Agreement.AGREE: Tone.PASS, Agreement.DRIFT: Tone.WARN, Agreement.DISAGREE: Tone.FAIL, Agreement.ERROR: Tone.FAIL}


@dataclass(frozen=True)
class TextAgreement:
    KEY: ClassVar[str] = "agreement"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    similarity: float
    level: Agreement  # harness.checks.agreement's word for the similarity
    reference: str  # the reference pair's text
    detail: JsonObject = field(default_factory=dict, compare=False)  # as written (changes and all)

    def junit(self) -> dict[str, str | None]:
        return {"agreement": self.level.value, "agreement_similarity": fmt3(self.similarity),
                "agreement_reference": self.reference}

    def rows(self) -> tuple[Row, ...]:
        return (Row("text vs the reference pair", f"{self.level.value}, similarity {self.similarity:.2f}",
                    _TONE[self.level]),)

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return dict(self.detail)

    @classmethod
    def of_json(cls, raw: Any) -> Self:
        raw = json_object(raw, "a text agreement")
        similarity, level = raw["similarity"], raw["level"]
        if isinstance(similarity, bool) or not isinstance(similarity, int | float) or not isinstance(level, str):
            raise ValueError("a text agreement without its similarity or level")
        return cls(float(similarity), Agreement(level), str(raw.get("reference") or ""), dict(raw))
