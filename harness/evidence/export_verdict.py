"""An export's verdict on one device (harness.checks.export_verdict): its word and one line per
instrument (static quant, teacher-forced per pair, text coherence), as the summary check made it.
Its teacher-forced figures (medians over all prompts) feed the history's teacher-forced columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, Fold, JsonObject, Row, fmt3, fmt6, json_number
from harness.evidence.teacher_forced import TF_COLUMNS


class LineVerdict(StrEnum):
    """An export's word, and each of its instrument lines' word."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    NOT_RUN = "not-run"


@dataclass(frozen=True)
class ExportVerdictLine:
    instrument: str
    verdict: LineVerdict
    summary: str
    pair: str | None
    figures: JsonObject = field(default_factory=dict)  # the instrument's own figures, as written


@dataclass(frozen=True)
class ExportVerdictEvidence:
    KEY: ClassVar[str] = "export_verdict"
    COLUMNS: ClassVar[tuple[Column, ...]] = (Column("export_verdict", "TEXT", Fold.FIRST), *TF_COLUMNS)

    verdict: LineVerdict
    lines: tuple[ExportVerdictLine, ...]
    detail: JsonObject = field(default_factory=dict, compare=False)  # as written (failure_class and all)

    def teacher_forced(self) -> JsonObject | None:
        """The teacher-forced line's figures that tell most (the largest median KL among its pairs)."""
        figs = [ln.figures for ln in self.lines if ln.instrument == "teacher-forced" and ln.figures.get("compared")]
        return max(figs, key=lambda f: json_number(f.get("median_kl")) or 0.0, default=None)

    def junit(self) -> dict[str, str | None]:
        props: dict[str, str | None] = {"export_verdict": self.verdict.value}
        for ln in self.lines:
            key = "export_" + ln.instrument.replace("-", "_") + (f"_{ln.pair}" if ln.pair else "")
            props[key] = f"{ln.verdict.value}: {ln.summary}"
        fig = self.teacher_forced() or {}
        props.update({"export_tf_median_kl": fmt6(json_number(fig.get("median_kl"))),
                      "export_tf_worst_kl": fmt6(json_number(fig.get("worst_kl"))),
                      "export_tf_median_flip_share": fmt3(json_number(fig.get("median_flip_share"))),
                      "export_tf_median_nll_gap": fmt6(json_number(fig.get("median_nll_gap")))})
        return props

    def rows(self) -> tuple[Row, ...]:
        return ()  # the page's "Export verdicts" table, a line per instrument

    def columns(self) -> dict[str, Cell]:
        fig = self.teacher_forced() or {}
        return {"export_verdict": self.verdict.value, "tf_mean_kl": json_number(fig.get("median_kl")),
                "tf_nll_gap": json_number(fig.get("median_nll_gap")),
                "tf_disagree_rate": json_number(fig.get("median_flip_share")), "tf_worst_kl": json_number(fig.get("worst_kl"))}

    def to_json(self) -> JsonObject:
        return dict(self.detail)

    @classmethod
    def of_json(cls, raw: JsonObject) -> Self:
        verdict = raw.get("verdict")
        if not isinstance(verdict, str) or not verdict:
            raise ValueError("an export verdict without its word")
        lines = tuple(ExportVerdictLine(str(ln.get("instrument", "")), LineVerdict(str(ln.get("verdict", ""))),
                                        str(ln.get("summary", "")), ln.get("pair") or None,
                                        dict(ln["figures"]) if isinstance(ln.get("figures"), dict) else {})
                      for ln in raw.get("lines") or [] if isinstance(ln, dict))
        return cls(LineVerdict(verdict), lines, dict(raw))
