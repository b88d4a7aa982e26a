"""The report's QNN profile section: each record's QNN profile views (harness.evidence.ProfileTable,
given today by the QNN ETDump family, made by harness/runners/executorch/qnn_profile.py) as a few
rows a reader can scan.

QNN's numbers are cycles, and on the host's HTP emulator they are emulator cycles, not device
speed: the unit label travels with the data (`unit_label`, "cycles, emulator") and the page
prints it beside every number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.evidence import ProfileTable
from harness.report.records import TestRecord

TOP_OPS_SHOWN = 5


@dataclass
class QnnProfileRow:
    device: str
    test: str
    unit: str  # "cycles" or "cycles, emulator"
    accelerator: float | None
    ops_total: float
    ops: int
    top: list[tuple[str, str, float]] = field(default_factory=list)  # node, op, cycles
    cpu_ops: list[str] = field(default_factory=list)
    note: str = ""


def qnn_profiles(records: Iterable[TestRecord]) -> list[QnnProfileRow]:
    out = []
    for r in records:
        for q in r.evidence.views(ProfileTable):
            top = [(e.label, e.op or "", e.total) for e in q.top[:TOP_OPS_SHOWN]]
            out.append(QnnProfileRow(r.device, r.name, q.unit, q.accelerator, q.ops_total, q.ops, top,
                                     list(q.cpu_ops), q.note))
    return out
