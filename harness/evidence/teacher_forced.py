"""A cell's teacher-forced comparison against its CPU reference (MNN's llm_logits_diff, judged by
harness.runners.logits_diff): the figures the export's verdict and the history read, typed; the
whole judged form (rows near the first disagreement, labels, context) kept as its JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from harness.evidence.base import JsonObject, json_int, json_number


@dataclass(frozen=True)
class TeacherForced:
    KEY: ClassVar[str] = "teacher_forced"

    verdict: str  # the judge's word: agree, drift, disagree, error
    mean_kl: float | None
    nll_gap: float | None
    disagreements: int
    counted_steps: int
    kl_used: bool  # mean KL/NLL are usable (no uncounted step in them)
    first_disagreement: int | None
    detail: JsonObject = field(default_factory=dict, compare=False)  # the judged form, as written

    def to_json(self) -> JsonObject:
        return dict(self.detail)

    @classmethod
    def of_json(cls, raw: JsonObject) -> Self:
        verdict = raw.get("verdict")
        if not isinstance(verdict, str) or not verdict:
            raise ValueError("a teacher-forced comparison without its verdict")
        first: Any = raw.get("first_disagreement")
        return cls(verdict, json_number(raw.get("mean_kl")), json_number(raw.get("nll_gap")), int(raw.get("disagreements") or 0),
                   int(raw.get("counted_steps") or 0), bool(raw.get("kl_used", True)),
                   json_int(first), dict(raw))
