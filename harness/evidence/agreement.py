"""A generated text's agreement with the reference pair's text for the same prompt
(harness.checks.agreement, judged by the pipeline): the similarity, its level and the reference
text; the first changes as written kept as its JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from harness.evidence.base import JsonObject, json_object


@dataclass(frozen=True)
class TextAgreement:
    KEY: ClassVar[str] = "agreement"

    similarity: float
    level: str  # harness.checks.agreement's word for the similarity
    reference: str  # the reference pair's text
    detail: JsonObject = field(default_factory=dict, compare=False)  # as written (changes and all)

    def to_json(self) -> JsonObject:
        return dict(self.detail)

    @classmethod
    def of_json(cls, raw: Any) -> Self:
        raw = json_object(raw, "a text agreement")
        similarity, level = raw["similarity"], raw["level"]
        if isinstance(similarity, bool) or not isinstance(similarity, int | float) or not isinstance(level, str):
            raise ValueError("a text agreement without its similarity or level")
        return cls(float(similarity), level, str(raw.get("reference") or ""), dict(raw))
