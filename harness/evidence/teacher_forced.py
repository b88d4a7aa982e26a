"""A cell's teacher-forced comparison against its CPU reference (MNN's llm_logits_diff, judged by
harness.runners.logits_diff): the figures the export's verdict and the history read, typed, with
its verdict as an `Agreement` word; the place it first disagrees (the step and the text around
it) typed for the page; the judged form as written (rows near the first disagreement, labels)
kept for the record's JSON line only."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Self

from harness.evidence.base import Cell, Column, Fold, JsonObject, Row, fmt3, fmt6, json_int, json_number


class Agreement(StrEnum):
    """A comparison's word against its reference (teacher-forced, or a float reference)."""

    AGREE = "agree"
    DRIFT = "drift"
    DISAGREE = "disagree"
    ERROR = "error"
    OVER_BUDGET = "over-budget"  # a float reference's figures over the format's quality budget (checks.float_reference)


# The history's teacher-forced columns (an export's verdict fills them too, over all its prompts).
TF_COLUMNS = (Column("tf_mean_kl", "REAL", Fold.MEDIAN), Column("tf_nll_gap", "REAL", Fold.MEDIAN),
              Column("tf_disagree_rate", "REAL", Fold.MEDIAN), Column("tf_worst_kl", "REAL", Fold.MAX))


@dataclass(frozen=True)
class StepContext:
    """A's text before the first disagreeing step, that step's token, and what follows."""

    before: str
    token: str
    after: str


@dataclass(frozen=True)
class TeacherForced:
    KEY: ClassVar[str] = "teacher_forced"
    COLUMNS: ClassVar[tuple[Column, ...]] = TF_COLUMNS

    verdict: Agreement
    mean_kl: float | None
    nll_gap: float | None
    disagreements: int
    counted_steps: int
    kl_used: bool  # mean KL/NLL are usable (no uncounted step in them)
    first_disagreement: int | None
    a: str = ""  # the reference pair's label
    b: str = ""  # the judged pair's label
    context: StepContext | None = None
    nll_a: float | None = None
    nll_b: float | None = None
    worst_max_abs_diff: float | None = None
    note: str = ""  # why steps were excluded
    rows_near: tuple[JsonObject, ...] = ()  # the steps near the first disagreement, as written
    detail: JsonObject = field(default_factory=dict, compare=False)  # the judged form, as written (JSON line only)

    @property
    def pair(self) -> str:
        return f"{self.b} vs {self.a}"

    @property
    def disagree_rate(self) -> float | None:
        return self.disagreements / self.counted_steps if self.counted_steps else None

    def junit(self) -> dict[str, str | None]:
        ctx = self.context
        return {"teacher_forced": self.verdict.value, "teacher_forced_pair": self.pair,
                "teacher_forced_disagreements": f"{self.disagreements}/{self.counted_steps}",
                "teacher_forced_first_disagreement": None if self.first_disagreement is None else str(self.first_disagreement),
                "teacher_forced_context": None if ctx is None else f"{ctx.before}[{ctx.token}]{ctx.after}",
                "teacher_forced_mean_kl": fmt6(self.mean_kl), "teacher_forced_nll_a": fmt6(self.nll_a),
                "teacher_forced_nll_b": fmt6(self.nll_b), "teacher_forced_worst_max_abs_diff": fmt3(self.worst_max_abs_diff),
                "teacher_forced_note": self.note or None}

    def rows(self) -> tuple[Row, ...]:
        return ()  # the cell's teacher-forced line and "where each backend departs" (its own sections)

    def columns(self) -> dict[str, Cell]:
        if self.verdict is Agreement.ERROR or not self.counted_steps:
            return {}
        kl = self.mean_kl if self.kl_used else None
        return {"tf_mean_kl": kl, "tf_nll_gap": self.nll_gap if self.kl_used else None,
                "tf_disagree_rate": self.disagree_rate, "tf_worst_kl": kl}

    def to_json(self) -> JsonObject:
        return dict(self.detail)

    @classmethod
    def of_json(cls, raw: JsonObject) -> Self:
        verdict = raw.get("verdict")
        if not isinstance(verdict, str) or not verdict:
            raise ValueError("a teacher-forced comparison without its verdict")
        first: Any = raw.get("first_disagreement")
        ctx = raw.get("context")
        context = (StepContext(str(ctx.get("before", "")), str(ctx.get("token", "")), str(ctx.get("after", "")))
                   if isinstance(ctx, dict) else None)
        near = raw.get("rows_near") or []
        return cls(Agreement(verdict), json_number(raw.get("mean_kl")), json_number(raw.get("nll_gap")),
                   int(raw.get("disagreements") or 0), int(raw.get("counted_steps") or 0), bool(raw.get("kl_used", True)),
                   json_int(first), str(raw.get("a") or ""), str(raw.get("b") or ""), context,
                   json_number(raw.get("nll_a")), json_number(raw.get("nll_b")), json_number(raw.get("worst_max_abs_diff")),
                   str(raw.get("exclusion_note") or ""),
                   tuple(dict(r) for r in near if isinstance(r, dict)) if isinstance(near, list) else (), dict(raw))
