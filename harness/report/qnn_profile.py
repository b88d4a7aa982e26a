"""The report's QNN profile section: a record's QNN ETDump view (extras["qnn_etdump"], written by
harness/runners/executorch/qnn_profile.py `QnnEtdump.to_json`) as a few rows a reader can scan.

QNN's numbers are cycles, and on the host's HTP emulator they are emulator cycles, not device
speed: the unit label travels with the data (`unit_label`, "cycles, emulator") and the page
prints it beside every number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.report.records import TestRecord

QNN_ETDUMP_KEY = "qnn_etdump"  # the record extra that holds a QNN ETDump view
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


def qnn_etdump_of(rec: TestRecord) -> dict[str, Any] | None:
    data = rec.extras.get(QNN_ETDUMP_KEY)
    return data if isinstance(data, dict) else None


def qnn_profiles(records: Iterable[TestRecord]) -> list[QnnProfileRow]:
    out = []
    for r in records:
        j = qnn_etdump_of(r)
        if j is None:
            continue
        top = [(str(e.get("node") or f"OpId_{e.get('op_id')}"), str(e.get("op") or ""), float(e.get("total", 0.0)))
               for e in (j.get("top_ops") or [])[:TOP_OPS_SHOWN]]
        out.append(QnnProfileRow(r.device, r.name, str(j.get("unit_label") or "cycles"), j.get("accelerator_cycles"),
                                 float(j.get("op_cycles_total") or 0.0), int(j.get("qnn_ops") or 0), top,
                                 [str(c.get("name")) for c in (j.get("cpu_ops") or [])], str(j.get("note") or "")))
    return out
