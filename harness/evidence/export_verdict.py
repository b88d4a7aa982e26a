"""An export's verdict on one device (harness.checks.export_verdict): its word, its failure class
and one line per instrument (static quant, teacher-forced per pair, text coherence) with that
instrument's figures, as the summary check made it. Its teacher-forced figures (medians over all
prompts) feed the history's teacher-forced columns."""

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
from harness.evidence.teacher_forced import TF_COLUMNS, Agreement
from harness.outcomes import FailureClass


class LineVerdict(StrEnum):
    """An export's word, and each of its instrument lines' word."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    NOT_RUN = "not-run"


class Instrument(StrEnum):
    STATIC_QUANT = "static-quant"
    TEACHER_FORCED = "teacher-forced"
    TEXT_COHERENCE = "text-coherence"


def _class(raw: object) -> FailureClass | None:
    return None if raw is None else FailureClass(str(raw))


@dataclass(frozen=True)
class TfFigures:
    """A teacher-forced line's figures: one backend pair over all the export's prompts."""

    verdict: Agreement
    pair: str
    prompts: int
    compared: int
    verdicts: tuple[tuple[Agreement, int], ...]  # how many prompts had each word
    median_kl: float | None = None
    worst_kl: float | None = None
    median_flip_share: float | None = None
    worst_flip_share: float | None = None
    median_nll_gap: float | None = None
    worst_nll_gap: float | None = None
    reasons: tuple[str, ...] = ()
    odd_prompts: tuple[str, ...] = ()

    def to_json(self) -> JsonObject:
        return {"verdict": self.verdict.value, "pair": self.pair, "reasons": list(self.reasons),
                "odd_prompts": list(self.odd_prompts), "prompts": self.prompts, "compared": self.compared,
                "verdicts": {w.value: n for w, n in self.verdicts}, "median_kl": self.median_kl,
                "worst_kl": self.worst_kl, "median_flip_share": self.median_flip_share,
                "worst_flip_share": self.worst_flip_share, "median_nll_gap": self.median_nll_gap,
                "worst_nll_gap": self.worst_nll_gap}

    @classmethod
    def of_json(cls, raw: JsonObject) -> TfFigures:
        verdicts = json_object(raw.get("verdicts") or {}, "a teacher-forced line's verdicts")
        return cls(Agreement(str(raw["verdict"])), str(raw.get("pair") or ""), int(raw["prompts"]),
                   int(raw["compared"]), tuple(sorted((Agreement(w), int(n)) for w, n in verdicts.items())),
                   json_number(raw.get("median_kl")), json_number(raw.get("worst_kl")),
                   json_number(raw.get("median_flip_share")), json_number(raw.get("worst_flip_share")),
                   json_number(raw.get("median_nll_gap")), json_number(raw.get("worst_nll_gap")),
                   json_texts(raw.get("reasons"), "reasons"), json_texts(raw.get("odd_prompts"), "odd_prompts"))


@dataclass(frozen=True)
class CoherenceFigures:
    """A text-coherence line's figures: answers judged, and how many were garbled."""

    answers: int
    garbled: int

    def to_json(self) -> JsonObject:
        return {"answers": self.answers, "garbled": self.garbled}

    @classmethod
    def of_json(cls, raw: JsonObject) -> CoherenceFigures:
        answers, garbled = json_int(raw.get("answers")), json_int(raw.get("garbled"))
        if answers is None or garbled is None:
            raise ValueError("a text-coherence line's figures without answers or garbled")
        return cls(answers, garbled)


Figures = TfFigures | CoherenceFigures


def _figures(instrument: Instrument, raw: object) -> Figures | None:
    figs = json_object(raw if raw is not None else {}, "an instrument line's figures")
    if not figs:
        return None  # a line that did not run, or the static quant's (its summary says it)
    if instrument is Instrument.TEACHER_FORCED:
        return TfFigures.of_json(figs)
    if instrument is Instrument.TEXT_COHERENCE:
        return CoherenceFigures.of_json(figs)
    raise ValueError(f"figures on a {instrument.value} line")


@dataclass(frozen=True)
class ExportVerdictLine:
    instrument: Instrument
    verdict: LineVerdict
    summary: str
    pair: str | None = None  # the backend pair a teacher-forced line judges
    failure_class: FailureClass | None = None
    figures: Figures | None = None

    def to_json(self) -> JsonObject:
        return {"instrument": self.instrument.value, "verdict": self.verdict.value, "summary": self.summary,
                "pair": self.pair, "failure_class": None if self.failure_class is None else self.failure_class.value,
                "figures": {} if self.figures is None else self.figures.to_json()}

    @classmethod
    def of_json(cls, raw: object) -> ExportVerdictLine:
        ln = json_object(raw, "an export verdict's line")
        instrument = Instrument(str(ln.get("instrument", "")))
        return cls(instrument, LineVerdict(str(ln.get("verdict", ""))), str(ln.get("summary", "")),
                   str(ln["pair"]) if ln.get("pair") else None, _class(ln.get("failure_class")),
                   _figures(instrument, ln.get("figures")))


@dataclass(frozen=True)
class ExportLines:
    """The page's "Export verdicts" table: one export's word on one device, a line per instrument."""

    verdict: LineVerdict
    lines: tuple[ExportVerdictLine, ...]


@dataclass(frozen=True)
class ExportVerdictEvidence:
    KEY: ClassVar[str] = "export_verdict"
    COLUMNS: ClassVar[tuple[Column, ...]] = (Column("export_verdict", "TEXT", Fold.FIRST), *TF_COLUMNS)

    verdict: LineVerdict
    lines: tuple[ExportVerdictLine, ...]
    failure_class: FailureClass | None = None  # the deciding line's, on a failed export

    def teacher_forced(self) -> TfFigures | None:
        """The teacher-forced line's figures that tell most (the largest median KL among its pairs)."""
        figs = [ln.figures for ln in self.lines if isinstance(ln.figures, TfFigures) and ln.figures.compared]
        return max(figs, key=lambda f: f.median_kl or 0.0, default=None)

    def junit(self) -> dict[str, str | None]:
        props: dict[str, str | None] = {"export_verdict": self.verdict.value}
        for ln in self.lines:
            key = "export_" + ln.instrument.value.replace("-", "_") + (f"_{ln.pair}" if ln.pair else "")
            props[key] = f"{ln.verdict.value}: {ln.summary}"
        fig = self.teacher_forced()
        if fig is not None:
            props.update({"export_tf_median_kl": fmt6(fig.median_kl), "export_tf_worst_kl": fmt6(fig.worst_kl),
                          "export_tf_median_flip_share": fmt3(fig.median_flip_share),
                          "export_tf_median_nll_gap": fmt6(fig.median_nll_gap)})
        return props

    def rows(self) -> tuple[Row, ...]:
        return ()  # the page's "Export verdicts" table, a line per instrument: its view

    def views(self) -> tuple[object, ...]:
        return (ExportLines(self.verdict, self.lines),)

    def columns(self) -> dict[str, Cell]:
        fig = self.teacher_forced() or TfFigures(Agreement.ERROR, "", 0, 0, ())  # no figures: none filled
        return {"export_verdict": self.verdict.value, "tf_mean_kl": fig.median_kl, "tf_nll_gap": fig.median_nll_gap,
                "tf_disagree_rate": fig.median_flip_share, "tf_worst_kl": fig.worst_kl}

    def to_json(self) -> JsonObject:
        return {"verdict": self.verdict.value,
                "failure_class": None if self.failure_class is None else self.failure_class.value,
                "lines": [ln.to_json() for ln in self.lines]}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        r = json_object(raw, "an export verdict")
        verdict = r.get("verdict")
        if not isinstance(verdict, str) or not verdict:
            raise ValueError("an export verdict without its word")
        lines = r.get("lines") or []
        if not isinstance(lines, list):
            raise ValueError("an export verdict's lines is not a list")
        # `failure_class` is always written; a line without it (older) stays free-form, as written
        return cls(LineVerdict(verdict), tuple(ExportVerdictLine.of_json(ln) for ln in lines), _class(r["failure_class"]))
