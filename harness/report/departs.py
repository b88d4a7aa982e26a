"""The report's "where it departs" view: per device and model, one place for both lanes.

The ExecuTorch lane: the localization (harness.checks.localize), the first op under the format's
threshold with its layer, SQNR, cosine and clipped share, the ops after it, and a plot of SQNR per op
along the graph. The MNN lane: the static quant check's first wrong range (the tensor and the layer)
and each teacher-forced comparison's first disagreeing step."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.evidence import LocalizeEvidence, OpGap, QuantFinding, TeacherForced
from harness.report.plots import plot_localization
from harness.report.records import TestRecord


@dataclass
class OpsLane:
    """One localization (the ExecuTorch lane)."""

    test: str
    cell: str  # the failed cell it explains; "" when it was asked for
    outcome: str
    summary: str
    format: str
    threshold_db: float
    first: OpGap | None
    following: tuple[OpGap, ...]
    compared: int
    judged: int
    plot: str  # a data: URI of the per-op plot ("" when nothing was compared)


@dataclass
class StepLane:
    """One teacher-forced comparison's first disagreeing step (the MNN lane)."""

    test: str
    pair: str
    verdict: str
    step: int


@dataclass
class WhereItDeparts:
    device: str
    model: str
    ops: list[OpsLane] = field(default_factory=list)
    quant: QuantFinding | None = None
    quant_test: str = ""
    steps: list[StepLane] = field(default_factory=list)


def _ops_lane(rec: TestRecord, ev: LocalizeEvidence) -> OpsLane:
    r = ev.result
    plot = ""
    if r.ops:
        plot = "data:image/png;base64," + base64.b64encode(plot_localization(r)).decode("ascii")
    return OpsLane(rec.name, ev.cell, r.outcome.value, r.summary(), r.format, r.threshold_db, r.first, r.following,
                   len(r.ops), sum(o.judged for o in r.ops), plot)


def where_it_departs(records: Sequence[TestRecord]) -> list[WhereItDeparts]:
    """Every (device, model) with a localization, a quant finding or a disagreeing step, in record order."""
    views: dict[tuple[str, str], WhereItDeparts] = {}

    def view(rec: TestRecord) -> WhereItDeparts:
        return views.setdefault((rec.device, rec.model), WhereItDeparts(rec.device, rec.model))

    for rec in records:
        loc = rec.evidence.get(LocalizeEvidence)
        if loc is not None:
            view(rec).ops.append(_ops_lane(rec, loc))
        quant = rec.evidence.get(QuantFinding)
        if quant is not None and view(rec).quant is None:
            view(rec).quant, view(rec).quant_test = quant, rec.name
        tf = rec.evidence.get(TeacherForced)
        if tf is not None and tf.first_disagreement is not None:
            view(rec).steps.append(StepLane(rec.name, tf.pair, tf.verdict.value, tf.first_disagreement))
    return list(views.values())
