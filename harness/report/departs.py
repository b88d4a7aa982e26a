"""The report's "where it departs" view: per device and model, one place for both lanes, from its
records' views (harness.evidence: OpsDeparture, QuantDeparture, StepDeparture, whichever family gives them).

The ExecuTorch lane: the localization (harness.checks.localize), the first op under the format's
threshold with its layer, SQNR, cosine and clipped share, the ops after it, and a plot of SQNR per op
along the graph. The MNN lane: the static quant check's first wrong range (the tensor and the layer)
and each teacher-forced comparison's first disagreeing step."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.evidence import OpGap, OpsDeparture, QuantDeparture, StepDeparture
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
    quant: QuantDeparture | None = None
    quant_test: str = ""
    steps: list[StepLane] = field(default_factory=list)


def _ops_lane(rec: TestRecord, ev: OpsDeparture) -> OpsLane:
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
        for loc in rec.evidence.views(OpsDeparture):
            view(rec).ops.append(_ops_lane(rec, loc))
        for quant in rec.evidence.views(QuantDeparture)[:1]:
            if view(rec).quant is None:
                view(rec).quant, view(rec).quant_test = quant, rec.name
        for step in rec.evidence.views(StepDeparture):
            view(rec).steps.append(StepLane(rec.name, step.pair, step.verdict.value, step.step))
    return list(views.values())
