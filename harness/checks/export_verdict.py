"""An export's verdict, one line per instrument: static quant (the cause, read from the graph),
teacher-forced (the logits against the CPU reference, per backend pair over all prompts) and
text coherence (the answers themselves: the fallback where no comparison tool runs).

The instruments see the activation-saturation fault at three depths (docs/logits-diff.md,
docs/coherence.md): the graph names the blocks, the logits show the shift, the text shows
only what reaches the words. Each line says what its instrument saw or why it did not run;
the export's verdict is the worst line, and the first failing line names the class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from harness.checks.teacher_forced import ExportTeacherForced, PromptFigures, judge_export
from harness.evidence import EvidenceSet, ExportVerdictEvidence, Instrument, LineVerdict, TeacherForced
from harness.outcomes import FailureClass, RecordWarning, Status
from harness.pairs import BackendPair
from harness.verdict import Verdict

_RANK = {LineVerdict.NOT_RUN: 0, LineVerdict.PASS: 1, LineVerdict.WARN: 2, LineVerdict.FAIL: 3}
_ORDER = (Instrument.STATIC_QUANT, Instrument.TEACHER_FORCED, Instrument.TEXT_COHERENCE)


@dataclass(frozen=True)
class InstrumentLine:
    instrument: Instrument
    verdict: LineVerdict
    summary: str
    pair: str = ""  # the backend pair a teacher-forced line judges
    failure_class: FailureClass | None = None
    figures: Mapping[str, object] = field(default_factory=dict)

    def describe(self) -> str:
        who = self.instrument.value + (f" {self.pair}" if self.pair else "")
        return f"{who}: {self.verdict.value}: {self.summary}"

    def to_json(self) -> dict[str, object]:
        return {"instrument": self.instrument.value, "verdict": self.verdict.value, "summary": self.summary,
                "pair": self.pair or None,
                "failure_class": None if self.failure_class is None else self.failure_class.value,
                "figures": dict(self.figures)}


@dataclass(frozen=True)
class ExportVerdict:
    lines: tuple[InstrumentLine, ...]

    @property
    def verdict(self) -> LineVerdict:
        return max((ln.verdict for ln in self.lines), key=_RANK.__getitem__, default=LineVerdict.NOT_RUN)

    @property
    def deciding(self) -> InstrumentLine | None:
        """The first line with the export's verdict (instrument order: cause, logits, text)."""
        return next((ln for ln in self.lines if ln.verdict == self.verdict), None)

    @property
    def failure_class(self) -> FailureClass | None:
        line = self.deciding
        return line.failure_class if line is not None and self.verdict == LineVerdict.FAIL else None

    def describe(self) -> str:
        return "\n".join(ln.describe() for ln in self.lines)

    def record_verdict(self) -> Verdict:
        """The testcase's verdict: failed with the deciding line's class; a warning line passes
        with the warning of its instrument (a teacher-forced drift, or some answers garbled)."""
        if self.verdict == LineVerdict.FAIL:
            return Verdict.failed(self.failure_class or FailureClass.CHECK_FAILED, self.describe())
        deciding = self.deciding
        if self.verdict == LineVerdict.WARN and deciding is not None:
            warning = (RecordWarning.LOGITS_DRIFT if deciding.instrument == Instrument.TEACHER_FORCED
                       else RecordWarning.GARBLED_ANSWERS)
            return Verdict.passed(self.describe(), warning=warning)
        return Verdict.passed(self.describe())

    def evidence(self) -> ExportVerdictEvidence:
        """What the export's record carries, typed (harness.evidence)."""
        return ExportVerdictEvidence.of_json(self.to_json())

    def to_json(self) -> dict[str, object]:
        return {"verdict": self.verdict.value,
                "failure_class": None if self.failure_class is None else self.failure_class.value,
                "lines": [ln.to_json() for ln in self.lines]}


def export_verdict(lines: Sequence[InstrumentLine]) -> ExportVerdict:
    """The lines in instrument order (static quant, teacher-forced, text coherence)."""
    return ExportVerdict(tuple(sorted(lines, key=lambda ln: _ORDER.index(ln.instrument))))


def static_quant_line(*, errors: Sequence[str] = (), skip_reason: str = "", summary: str = "") -> InstrumentLine:
    """The quantization check's line: failed with its findings, passed, or not run and why."""
    if skip_reason:
        return InstrumentLine(Instrument.STATIC_QUANT, LineVerdict.NOT_RUN, skip_reason)
    if errors:
        return InstrumentLine(Instrument.STATIC_QUANT, LineVerdict.FAIL, "; ".join(errors),
                              failure_class=FailureClass.QUANT_METADATA)
    return InstrumentLine(Instrument.STATIC_QUANT, LineVerdict.PASS, summary or "activation ranges calibrated")


def teacher_forced_line(tf: ExportTeacherForced) -> InstrumentLine:
    verdict = {"agree": LineVerdict.PASS, "drift": LineVerdict.WARN, "disagree": LineVerdict.FAIL,
               "error": LineVerdict.FAIL}[tf.verdict]
    cls = {"disagree": FailureClass.LOGITS_DISAGREE, "error": FailureClass.LOGITS_DIFF_ERROR}.get(tf.verdict)
    summary = f"{tf.verdict} ({tf.figures.summary()})"
    if tf.reasons:
        summary += ": " + "; ".join(tf.reasons)
    if tf.odd_prompts:
        summary += f"; odd prompt(s), not a shift: {', '.join(tf.odd_prompts)}"
    return InstrumentLine(Instrument.TEACHER_FORCED, verdict, summary, tf.pair, cls, tf.to_json())


def teacher_forced_not_run(reason: str) -> InstrumentLine:
    return InstrumentLine(Instrument.TEACHER_FORCED, LineVerdict.NOT_RUN, reason)


def text_coherence_line(answers: Mapping[str, Sequence[str]], *, fallback: bool) -> InstrumentLine:
    """`answers`: per backend pair, each answer's coherence verdict (`coherent`/`garbled`; an
    empty string for a run that gave no text). `fallback`: no teacher-forced comparison ran,
    so the text is the export's only look at what the model computes. A pair with half its
    answers or more garbled fails the line; fewer warn (each garbled answer fails its own record)."""
    judged = {pair: [v for v in verdicts if v] for pair, verdicts in answers.items()}
    total = sum(len(v) for v in judged.values())
    role = "the fallback: no comparison tool ran" if fallback else "alongside the teacher-forced comparison"
    if not total:
        return InstrumentLine(Instrument.TEXT_COHERENCE, LineVerdict.NOT_RUN, f"no answer was judged ({role})")
    garbled = {pair: sum(v != "coherent" for v in vs) for pair, vs in judged.items()}
    bad = sum(garbled.values())
    where = ", ".join(f"{pair} {n}/{len(judged[pair])}" for pair, n in garbled.items() if n)
    summary = f"{total - bad} of {total} answers coherent" + (f" (garbled: {where})" if bad else "") + f"; {role}"
    figures = {"answers": total, "garbled": bad}
    if any(n and 2 * n >= len(judged[pair]) for pair, n in garbled.items()):
        return InstrumentLine(Instrument.TEXT_COHERENCE, LineVerdict.FAIL, summary,
                              failure_class=FailureClass.GARBLED, figures=figures)
    verdict = LineVerdict.WARN if bad else LineVerdict.PASS
    return InstrumentLine(Instrument.TEXT_COHERENCE, verdict, summary, figures=figures)


class RecordLike(Protocol):
    """What the export's verdict reads of a matrix record (harness/report/records.py TestRecord)."""

    name: str
    status: Status
    backend_pair: BackendPair | None
    verdict: str
    message: str
    failure_class: FailureClass | None
    evidence: EvidenceSet

    @property
    def instrument(self) -> str | None: ...

    @property
    def is_bad(self) -> bool: ...


# A run that failed before there was an answer to judge (harness/catalogue/lines.yaml classes).
_RUN_FAILED = frozenset((
    FailureClass.TRANSPORT_ERROR, FailureClass.TIMEOUT, FailureClass.CRASH, FailureClass.LIBRARY_MISSING,
    FailureClass.QNN_LIBRARY_MISSING, FailureClass.BINARY_MISMATCH, FailureClass.INIT_ERROR,
    FailureClass.RUNTIME_ERROR))
NO_QUANT = ("no static quant check ran for this export in this run (it reads llm.mnn's activation ranges: "
            "`python -m harness.checks.quant llm.mnn`)")
NO_TOOL = "no comparison ran: the runtime holds no llm_logits_diff, or no pair besides the CPU reference ran"


def verdict_of_records(records: Iterable[RecordLike], *,
                       reference: BackendPair | None = None) -> ExportVerdict | None:
    """The export's verdict from one device's records of it: matrix records (a backend pair, a
    coherence verdict, maybe its TeacherForced evidence) and, when one ran, the static quant
    check's record (its `instrument` is "static-quant"). None: no matrix record to judge, or
    no instrument saw anything."""
    records = list(records)
    quant = next((r for r in records if r.instrument == Instrument.STATIC_QUANT.value), None)
    cells = [r for r in records if r.backend_pair is not None and r.status is not Status.SKIPPED and r is not quant]
    if not cells:
        return None
    prompts: dict[str, list[PromptFigures]] = {}
    answers: dict[str, list[str]] = {}
    failed_runs = 0
    for r in cells:
        assert r.backend_pair is not None
        if r.failure_class in _RUN_FAILED:
            failed_runs += 1
            continue  # the runtime failed before an answer: its record says so, nothing to judge here
        pair = r.backend_pair.name
        answers.setdefault(pair, []).append(r.verdict)
        tf = r.evidence.get(TeacherForced)
        if tf is not None and r.backend_pair != reference:
            prompts.setdefault(pair, []).append(PromptFigures.of_evidence(tf, r.name.rsplit("::", 1)[-1]))
    lines = [_quant_line(quant)]
    lines += [teacher_forced_line(judge_export(p, pair=pair)) for pair, p in prompts.items()]
    if not prompts:
        lines.append(teacher_forced_not_run(NO_TOOL if not failed_runs else
                                            f"{failed_runs} runs failed before an answer (their records say why)"))
    lines.append(text_coherence_line(answers, fallback=not prompts))
    if all(ln.verdict == LineVerdict.NOT_RUN for ln in lines):
        return None  # records of no check this module reads (a job of another kind)
    return export_verdict(lines)


def _quant_line(rec: RecordLike | None) -> InstrumentLine:
    if rec is None:
        return static_quant_line(skip_reason=NO_QUANT)
    if rec.status is Status.SKIPPED:
        return static_quant_line(skip_reason=rec.message or rec.status.value)
    if rec.is_bad:
        return static_quant_line(errors=[rec.message or rec.status.value])
    return static_quant_line(summary=rec.message)
