"""A cell's teacher-forced comparison against its CPU reference (MNN's llm_logits_diff, judged by
harness.runners.logits_diff): its verdict as an `Agreement` word, the figures the export's verdict
and the history read, the place it first disagrees (the step, the text around it, the rows near
it) and the run's own facts (chunks, excluded steps, the tool's error lines), all typed; its JSON
is the judge's compact form (`DiffResult.record_extras`), key for key."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Self

from harness.evidence.base import (
    Cell,
    Column,
    Fold,
    JsonObject,
    Row,
    fmt3,
    fmt6,
    json_int,
    json_number,
    json_object,
    json_texts,
)


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

    def to_json(self) -> JsonObject:
        return {"before": self.before, "token": self.token, "after": self.after}

    @classmethod
    def of_json(cls, raw: object) -> StepContext | None:
        if raw is None:
            return None
        ctx = json_object(raw, "a teacher-forced context")
        return cls(str(ctx.get("before", "")), str(ctx.get("token", "")), str(ctx.get("after", "")))


@dataclass(frozen=True)
class NearStep:
    """One row of the comparison near its first disagreement (the tool's row, judged)."""

    step: int
    tok_a: int
    tok_b: int
    agree: bool
    margin_a: float | None
    margin_b: float | None
    max_abs_diff: float | None
    mean_abs_diff: float | None
    text: str

    def to_json(self) -> JsonObject:
        return {"step": self.step, "tok_a": self.tok_a, "tok_b": self.tok_b, "agree": self.agree,
                "margin_a": self.margin_a, "margin_b": self.margin_b, "max_abs_diff": self.max_abs_diff,
                "mean_abs_diff": self.mean_abs_diff, "text": self.text}

    @classmethod
    def of_json(cls, raw: object) -> NearStep:
        r = json_object(raw, "a teacher-forced row")
        return cls(int(r["step"]), int(r["tok_a"]), int(r["tok_b"]), bool(r["agree"]), json_number(r.get("margin_a")),
                   json_number(r.get("margin_b")), json_number(r.get("max_abs_diff")),
                   json_number(r.get("mean_abs_diff")), str(r.get("text", "")))


@dataclass(frozen=True)
class TfLine:
    """A matrix cell's teacher-forced line, one prompt's part: its word, steps whose argmax differs,
    counted steps, and its mean KL where usable."""

    verdict: Agreement
    flips: int
    steps: int
    mean_kl: float | None


@dataclass(frozen=True)
class StepDeparture:
    """Where a comparison first disagrees: the page's departures and the MNN lane of "where it departs"."""

    pair: str
    verdict: Agreement
    step: int
    context: StepContext | None
    note: str
    rows_near: tuple[NearStep, ...]


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
    rows_near: tuple[NearStep, ...] = ()  # the steps near the first disagreement
    reasons: tuple[str, ...] = ()  # the judge's reasons for its verdict
    steps: int = 0  # rows the tool printed (counted or not)
    summary_disagreements: int | None = None  # as the tool's summary line says (all steps)
    excluded_steps: tuple[int, ...] = ()
    chunk_a: int | None = None  # each side's prefill chunk (None: one forward)
    chunk_b: int | None = None
    prompt_tokens: int | None = None
    stop_step: int | None = None
    tool_errors: tuple[str, ...] = ()  # the tool's error lines (a step without logits, a fatal line)
    exit_code: int | None = 0
    transport_error: str | None = None  # the link failed: the comparison may not have run
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
        return ()  # the cell's teacher-forced line and "where each backend departs": its views

    def views(self) -> tuple[object, ...]:
        line = TfLine(self.verdict, self.disagreements, self.counted_steps, self.mean_kl if self.kl_used else None)
        if self.first_disagreement is None:
            return (line,)
        return (line, StepDeparture(self.pair, self.verdict, self.first_disagreement, self.context, self.note,
                                    self.rows_near))

    def columns(self) -> dict[str, Cell]:
        if self.verdict is Agreement.ERROR or not self.counted_steps:
            return {}
        kl = self.mean_kl if self.kl_used else None
        return {"tf_mean_kl": kl, "tf_nll_gap": self.nll_gap if self.kl_used else None,
                "tf_disagree_rate": self.disagree_rate, "tf_worst_kl": kl}

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "verdict": self.verdict.value, "reasons": list(self.reasons), "steps": self.steps,
            "counted_steps": self.counted_steps, "disagreements": self.disagreements,
            "summary_disagreements": self.summary_disagreements, "first_disagreement": self.first_disagreement,
            "context": None if self.context is None else self.context.to_json(),
            "mean_kl": self.mean_kl, "nll_a": self.nll_a, "nll_b": self.nll_b, "nll_gap": self.nll_gap,
            "kl_used": self.kl_used, "worst_max_abs_diff": self.worst_max_abs_diff,
            "excluded_steps": list(self.excluded_steps), "exclusion_note": self.note or None,
            "chunk_a": self.chunk_a, "chunk_b": self.chunk_b, "prompt_tokens": self.prompt_tokens,
            "stop_step": self.stop_step, "tool_errors": list(self.tool_errors), "exit_code": self.exit_code,
            "transport_error": self.transport_error, "a": self.a, "b": self.b}
        if self.rows_near:  # written only where there is a first disagreement
            out["rows_near"] = [r.to_json() for r in self.rows_near]
        return out

    @classmethod
    def of_json(cls, raw: object) -> Self:
        r = json_object(raw, "a teacher-forced comparison")
        verdict = r.get("verdict")
        if not isinstance(verdict, str) or not verdict:
            raise ValueError("a teacher-forced comparison without its verdict")
        near = r.get("rows_near") or []
        excluded = r.get("excluded_steps") or []
        if not isinstance(near, list) or not isinstance(excluded, list):
            raise ValueError("a teacher-forced comparison's rows_near or excluded_steps is not a list")
        transport = r.get("transport_error")
        return cls(Agreement(verdict), json_number(r.get("mean_kl")), json_number(r.get("nll_gap")),
                   int(r.get("disagreements") or 0), int(r.get("counted_steps") or 0), bool(r.get("kl_used", True)),
                   json_int(r.get("first_disagreement")), str(r.get("a") or ""), str(r.get("b") or ""),
                   StepContext.of_json(r.get("context")), json_number(r.get("nll_a")), json_number(r.get("nll_b")),
                   json_number(r.get("worst_max_abs_diff")), str(r.get("exclusion_note") or ""),
                   tuple(NearStep.of_json(x) for x in near), json_texts(r.get("reasons"), "reasons"),
                   int(r.get("steps") or 0), json_int(r.get("summary_disagreements")),
                   tuple(int(x) for x in excluded), json_int(r.get("chunk_a")), json_int(r.get("chunk_b")),
                   json_int(r.get("prompt_tokens")), json_int(r.get("stop_step")),
                   json_texts(r.get("tool_errors"), "tool_errors"), json_int(r.get("exit_code", 0)),
                   None if transport is None else str(transport))

