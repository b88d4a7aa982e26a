"""QNN's own events in an ExecuTorch run's ETDump (runners/executorch/qnn_profile.py): per-op
cycles mapped to the graph's nodes, the accelerator's total, the ops left on the CPU. On the
host's HTP emulator the cycles are the emulator's: the unit label says so and travels with them.
The view as written (summary events, by-op table, ...) is kept as its JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, fmt3, json_number, json_object


@dataclass(frozen=True)
class QnnOpCycles:
    node: str  # the graph node, else OpId_<id>
    op: str
    total: float


@dataclass(frozen=True)
class QnnProfile:
    KEY: ClassVar[str] = "qnn_etdump"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    profiled: bool  # QNN's per-op events are there (the PTE was lowered with profile_level=2)
    qnn_ops: int
    unit_label: str  # "cycles" or "cycles, emulator"
    accelerator_cycles: float | None
    op_cycles_total: float
    top_ops: tuple[QnnOpCycles, ...]  # slowest first
    cpu_ops: tuple[str, ...]
    note: str
    detail: JsonObject = field(default_factory=dict, compare=False)  # the view as written

    def junit(self) -> dict[str, str | None]:
        if not self.profiled:
            return {}
        return {"etdump_qnn_ops": str(self.qnn_ops), "etdump_qnn_unit": self.unit_label,
                "etdump_qnn_accelerator_cycles": fmt3(self.accelerator_cycles)}

    def rows(self) -> tuple[Row, ...]:
        return ()  # the page's own "QNN profiles" table (report/qnn_profile.py): top ops, cycles with their unit

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return dict(self.detail)

    @classmethod
    def of_json(cls, raw: Any) -> Self:
        raw = json_object(raw, "a QNN ETDump view")
        top = [json_object(e, "a QNN top op") for e in raw.get("top_ops") or []]
        cpu = [json_object(c, "a QNN CPU op") for c in raw.get("cpu_ops") or []]
        return cls(bool(raw.get("profiled")), int(raw.get("qnn_ops") or 0), str(raw.get("unit_label") or "cycles"),
                   json_number(raw.get("accelerator_cycles")), float(raw.get("op_cycles_total") or 0.0),
                   tuple(QnnOpCycles(str(e.get("node") or f"OpId_{e.get('op_id')}"), str(e.get("op") or ""),
                                     float(e.get("total", 0.0))) for e in top),
                   tuple(str(c.get("name")) for c in cpu), str(raw.get("note") or ""), dict(raw))
