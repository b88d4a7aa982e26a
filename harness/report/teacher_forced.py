"""The page's teacher-forced views (a record's harness.evidence TfLine and StepDeparture views, given
today by the teacher-forced family): a matrix cell's line (the worst
verdict of its prompts, the steps whose argmax differs, the median KL) and "where each backend
departs from the CPU reference" (the first disagreeing step, the text around it, the rows near it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.evidence import Agreement, NearStep, StepDeparture, TfLine
from harness.report.records import TestRecord

_WORST = (Agreement.AGREE, Agreement.DRIFT, Agreement.DISAGREE, Agreement.ERROR)


@dataclass
class TeacherForcedCell:
    worst: str  # agree | drift | disagree | error: the worst verdict of the cell's prompts
    flips: int  # steps whose argmax differs, over all prompts
    steps: int
    kl: str  # ", KL 0.123" (median mean KL) or ""


def teacher_forced_cell(recs: Sequence[TestRecord]) -> TeacherForcedCell | None:
    tfs = [tf for r in recs for tf in r.evidence.views(TfLine)]
    if not tfs:
        return None
    kls = sorted(tf.mean_kl for tf in tfs if tf.mean_kl is not None)
    kl = kls[len(kls) // 2] if kls else None
    return TeacherForcedCell(worst=max((tf.verdict for tf in tfs), key=_WORST.index).value,
                             flips=sum(tf.flips for tf in tfs), steps=sum(tf.steps for tf in tfs),
                             kl=f", KL {kl:.3f}" if kl is not None else "")


@dataclass
class Departure:
    """Where B departs from A: one teacher-forced comparison that found a disagreement."""

    device: str
    name: str
    verdict: str
    step: int
    before: str
    token: str
    after: str
    note: str
    rows_near: list[NearStep]


def departures(records: Sequence[TestRecord]) -> list[Departure]:
    out = []
    for r in records:
        for d in r.evidence.views(StepDeparture):
            ctx = d.context
            out.append(Departure(r.device, r.name, d.verdict.value, d.step, ctx.before if ctx else "",
                                 ctx.token if ctx else "", ctx.after if ctx else "", d.note, list(d.rows_near)))
    return out


def any_teacher_forced(records: Sequence[TestRecord]) -> bool:
    return any(r.evidence.views(TfLine) for r in records)
