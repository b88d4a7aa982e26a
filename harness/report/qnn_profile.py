"""The report's QNN profile section: a record's QNN ETDump view (harness.evidence.QnnProfile, made by
harness/runners/executorch/qnn_profile.py `QnnEtdump.evidence`) as a few rows a reader can scan.

QNN's numbers are cycles, and on the host's HTP emulator they are emulator cycles, not device
speed: the unit label travels with the data (`unit_label`, "cycles, emulator") and the page
prints it beside every number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.evidence import QnnProfile
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
        q = r.evidence.get(QnnProfile)
        if q is None:
            continue
        top = [(e.label, e.op or "", e.total) for e in q.top_ops[:TOP_OPS_SHOWN]]
        out.append(QnnProfileRow(r.device, r.name, q.unit_label, q.accelerator_cycles, q.op_cycles_total, q.qnn_ops,
                                 top, [c.name for c in q.cpu_ops], q.note))
    return out
