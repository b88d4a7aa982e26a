"""QNN's own events in an ExecuTorch run's ETDump (runners/executorch/qnn_profile.py): per-op
cycles mapped to the graph's nodes, QNN's summary events (accelerator time, HVX threads, ...), the
accelerator's total, the ops left on the CPU, the runtime's own calls. On the host's HTP emulator
the cycles are the emulator's: the unit label says so and travels with them. Its JSON is the
view's (`QnnEtdump.to_json`), key for key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from harness.evidence.base import (
    Cell,
    Column,
    JsonObject,
    Row,
    fmt3,
    json_floats,
    json_int,
    json_number,
    json_object,
    json_texts,
)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _list(raw: object, what: str) -> list[object]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TypeError(f"{what} is not a list")
    return raw


@dataclass(frozen=True)
class QnnOpCycles:
    """One QNN op's event: its cycles per call (graph IO events are marked `io`)."""

    op_id: int
    node: str | None  # the graph node; None for an op QNN inserted (`OpId_17`)
    op: str | None  # the node's op in the ETRecord's graph
    cycles: tuple[float, ...]
    total: float
    io: str | None = None  # "Input" / "Output" for QNN's graph IO events

    @property
    def label(self) -> str:
        return self.node or f"OpId_{self.op_id}"

    def to_json(self) -> JsonObject:
        return {"op_id": self.op_id, "node": self.node, "op": self.op, "io": self.io, "cycles": list(self.cycles),
                "total": self.total}

    @classmethod
    def of_json(cls, raw: object) -> QnnOpCycles:
        e = json_object(raw, "a QNN top op")
        op_id, total = json_int(e.get("op_id")), json_number(e.get("total"))
        if op_id is None or total is None:
            raise ValueError("a QNN top op without its op id or total")
        return cls(op_id, _text(e.get("node")), _text(e.get("op")), json_floats(e.get("cycles"), "a QNN op's cycles"),
                   total, _text(e.get("io")))


@dataclass(frozen=True)
class QnnSummaryEvent:
    """One of QNN's summary events, its unit out of its name: `Accelerator (execute) time`, cycles."""

    name: str
    unit: str  # cycles | us | count | bytes
    values: tuple[float, ...]  # one per call

    def to_json(self) -> JsonObject:
        return {"name": self.name, "unit": self.unit, "values": list(self.values)}

    @classmethod
    def of_json(cls, raw: object) -> QnnSummaryEvent:
        e = json_object(raw, "a QNN summary event")
        return cls(str(e["name"]), str(e["unit"]), json_floats(e.get("values"), "a QNN summary event's values"))


@dataclass(frozen=True)
class CpuOp:
    """An op left on the CPU: its name, op types and runtime ticks."""

    name: str
    op_types: tuple[str, ...]
    total: float

    def to_json(self) -> JsonObject:
        return {"name": self.name, "op_types": list(self.op_types), "total": self.total}

    @classmethod
    def of_json(cls, raw: object) -> CpuOp:
        c = json_object(raw, "a QNN CPU op")
        return cls(str(c["name"]), json_texts(c.get("op_types"), "a CPU op's op types"),
                   json_number(c.get("total")) or 0.0)


@dataclass(frozen=True)
class ProfileTable:
    """The page's "QNN profiles" table: one run's accelerator total, ops and the slowest, each figure
    with its unit ("cycles, emulator" on the host's emulator)."""

    unit: str
    accelerator: float | None
    ops_total: float
    ops: int
    top: tuple[QnnOpCycles, ...]  # slowest first
    cpu_ops: tuple[str, ...]
    note: str


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
    cpu_ops: tuple[CpuOp, ...]
    note: str  # why there are no per-op events ("" when there are)
    clock: str | None = None  # "emulator" on the host's HTP emulator
    qnn_io_events: int = 0
    mapped_to_graph: bool = False  # node names were looked up in an ETRecord's graph
    unmapped_nodes: tuple[str, ...] = ()  # node names the ETRecord's graph lacks
    summary: tuple[QnnSummaryEvent, ...] = ()
    by_op: tuple[tuple[str, float], ...] = ()  # total cycles per op kind (the node's op, else its name)
    delegate_calls: tuple[float, ...] = ()  # DELEGATE_CALL per call, runtime ticks
    method_execute: tuple[float, ...] = ()  # Method::execute per call, runtime ticks
    unit: str = "cycles"  # QNN's values' unit
    runtime_unit: str = "ns"  # ExecuTorch's own events' unit

    def junit(self) -> dict[str, str | None]:
        if not self.profiled:
            return {}
        return {"etdump_qnn_ops": str(self.qnn_ops), "etdump_qnn_unit": self.unit_label,
                "etdump_qnn_accelerator_cycles": fmt3(self.accelerator_cycles)}

    def rows(self) -> tuple[Row, ...]:
        return ()  # the page's own "QNN profiles" table: its view

    def views(self) -> tuple[object, ...]:
        return (ProfileTable(self.unit_label, self.accelerator_cycles, self.op_cycles_total, self.qnn_ops, self.top_ops,
                             tuple(c.name for c in self.cpu_ops), self.note),)

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return {"unit": self.unit, "unit_label": self.unit_label, "clock": self.clock, "runtime_unit": self.runtime_unit,
                "profiled": self.profiled, "qnn_ops": self.qnn_ops, "qnn_io_events": self.qnn_io_events,
                "mapped_to_graph": self.mapped_to_graph, "unmapped_nodes": list(self.unmapped_nodes),
                "accelerator_cycles": self.accelerator_cycles, "op_cycles_total": self.op_cycles_total,
                "summary": [s.to_json() for s in self.summary], "top_ops": [e.to_json() for e in self.top_ops],
                "by_op": dict(self.by_op), "cpu_ops": [c.to_json() for c in self.cpu_ops],
                "delegate_calls": list(self.delegate_calls), "method_execute": list(self.method_execute),
                "note": self.note or None}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        r = json_object(raw, "a QNN ETDump view")
        by_op = json_object(r.get("by_op") or {}, "a QNN ETDump view's by_op")
        return cls(bool(r.get("profiled")), int(r.get("qnn_ops") or 0), str(r.get("unit_label") or "cycles"),
                   json_number(r.get("accelerator_cycles")), float(r.get("op_cycles_total") or 0.0),
                   tuple(QnnOpCycles.of_json(e) for e in _list(r.get("top_ops"), "top_ops")),
                   tuple(CpuOp.of_json(c) for c in _list(r.get("cpu_ops"), "cpu_ops")), str(r.get("note") or ""),
                   _text(r.get("clock")), int(r.get("qnn_io_events") or 0), bool(r.get("mapped_to_graph")),
                   json_texts(r.get("unmapped_nodes"), "unmapped_nodes"),
                   tuple(QnnSummaryEvent.of_json(e) for e in _list(r.get("summary"), "summary")),
                   tuple((str(k), json_number(v) or 0.0) for k, v in sorted(by_op.items(), key=lambda kv: (-float(kv[1]), kv[0]))),
                   json_floats(r.get("delegate_calls"), "delegate_calls"),
                   json_floats(r.get("method_execute"), "method_execute"), str(r.get("unit") or "cycles"),
                   str(r.get("runtime_unit") or "ns"))
