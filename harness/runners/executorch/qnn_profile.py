"""The QNN view of an ETDump: QNN's per-op events in cycles, mapped to the graph's nodes.

A PTE lowered with `profile_level=2` logs one delegate event per QNN op, named
`<node>:OpId_N (cycles)` (`Input OpId_N` / `Output OpId_N` for the graph IO, a bare `OpId_N` for
an op QNN inserted itself), and QNN summary events whose unit is in the name: `Accelerator
(execute) time (cycles)`, `QNN (execute) time (us)`, `Number of HVX threads used (count)`, ...
Without profiling the dump holds only `DELEGATE_CALL` (docs/executorch-runner.md#qnn-etdump).
The rows must come from an Inspector built with CYCLES/CYCLES time scales (etdump.load_rows with
qnn=True), which passes every value through unscaled: QNN's values are in their own unit, and
ExecuTorch's own events (`Method::execute`, `DELEGATE_CALL`, CPU ops) in the runtime's clock
ticks (nanoseconds on the host). The node names are the edge graph's: with the ETRecord each is
mapped to its node there and that node's op.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.evidence import CpuOp, OpCycle, OpCycles, QnnProfile
from harness.runners.executorch.etdump import analyse_rows, load_rows

_OP_EVENT = re.compile(r"^(?:(?P<node>.+?):)?OpId_(?P<id>\d+) \(cycles\)$")
_IO_EVENT = re.compile(r"^(?P<kind>Input|Output) OpId_(?P<id>\d+) \(cycles\)$")
_UNIT = re.compile(r"\((?P<unit>cycles|us|count|bytes)\)$")
RUNTIME_UNIT = "ns"  # ExecuTorch's own events: the host runtime's ticks under CYCLES/CYCLES


@dataclass(frozen=True)
class QnnOpEvent:
    op_id: int
    node: str | None  # the graph node's name; None for an op QNN inserted (`OpId_17`)
    cycles: tuple[float, ...]  # one value per call
    op: str | None = None  # the node's op in the ETRecord's graph (`aten.rms_norm.default`)
    io: str | None = None  # "Input" / "Output" for QNN's graph IO events
    module: str | None = None  # the module the node came from (`layers.1.down`), from the ETRecord

    @property
    def total(self) -> float:
        return float(sum(self.cycles))

    def to_json(self) -> dict[str, object]:
        return {"op_id": self.op_id, "node": self.node, "op": self.op, "io": self.io,
                "cycles": list(self.cycles), "total": self.total}


@dataclass(frozen=True)
class QnnSummaryEvent:
    name: str  # without its unit: `Accelerator (execute) time`
    unit: str  # cycles | us | count | bytes
    values: tuple[float, ...]

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "unit": self.unit, "values": list(self.values)}


@dataclass
class QnnEtdump:
    ops: list[QnnOpEvent]  # QNN's ops (graph IO events included, marked `io`)
    summary: list[QnnSummaryEvent]
    cpu_ops: list[CpuOp]  # the ops left on the CPU: name, op types, runtime ticks
    delegate_calls: tuple[float, ...]  # DELEGATE_CALL per call, runtime ticks
    method: tuple[float, ...]  # Method::execute per call, runtime ticks
    mapped: bool = False  # the node names were looked up in an ETRecord's graph
    unmapped: list[str] = field(default_factory=list)  # node names the ETRecord's graph lacks
    clock: str | None = None  # "emulator" on the host's HTP emulator: cycles are not device cycles

    @property
    def profiled(self) -> bool:
        return bool(self.ops)

    @property
    def unit_label(self) -> str:
        return "cycles, emulator" if self.clock == "emulator" else "cycles"

    def summary_value(self, name: str, unit: str) -> float | None:
        """The event's total over the run: a program of several QNN delegates (a KV program's two
        graphs) has each delegate's own summary events under the same name, so all are summed
        (the first alone was one graph's: 546,924 of 522,720,796 cycles on et-qnn-host/llm)."""
        hits = [s for s in self.summary if s.name == name and s.unit == unit]
        return float(sum(sum(s.values) for s in hits)) if hits else None

    def by_op(self) -> dict[str, float]:
        """Total cycles per op kind (the node's op, else its name), most expensive first."""
        out: dict[str, float] = {}
        for e in self.ops:
            if e.io is None:
                key = e.op or e.node or f"OpId_{e.op_id}"
                out[key] = out.get(key, 0.0) + e.total
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def to_json(self, top: int = 20) -> dict[str, Any]:
        ranked = sorted((e for e in self.ops if e.io is None), key=lambda e: -e.total)
        return {
            "unit": "cycles", "unit_label": self.unit_label, "clock": self.clock, "runtime_unit": RUNTIME_UNIT,
            "profiled": self.profiled, "qnn_ops": sum(1 for e in self.ops if e.io is None),
            "qnn_io_events": sum(1 for e in self.ops if e.io), "mapped_to_graph": self.mapped,
            "unmapped_nodes": list(self.unmapped),
            "accelerator_cycles": self.summary_value("Accelerator (execute) time", "cycles"),
            "op_cycles_total": sum(e.total for e in ranked),
            "summary": [s.to_json() for s in self.summary],
            "top_ops": [e.to_json() for e in ranked[:top]], "by_op": self.by_op(),
            "cpu_ops": [c.to_json() for c in self.cpu_ops], "delegate_calls": list(self.delegate_calls),
            "method_execute": list(self.method),
            "note": None if self.profiled else "no QNN per-op events: the PTE was lowered without profile_level=2 "
                                               "(its ETDump holds DELEGATE_CALL only)",
        }


    def op_cycles(self, program: str, profile_level: int) -> OpCycles:
        """Every QNN op's cycles (graph IO events left out), what the history keeps night to night:
        per op the least of the run's calls, the one a busy host disturbed least."""
        return OpCycles(program, self.unit_label, profile_level,
                        tuple(OpCycle(e.node or f"OpId_{e.op_id}", min(e.cycles, default=0.0), len(e.cycles),
                                      e.op or "", e.module or "") for e in self.ops if e.io is None))

    def evidence(self) -> QnnProfile:
        """What a suite record carries, typed (harness.evidence.QnnProfile); the report's QNN section reads it."""
        return QnnProfile.of_json(self.to_json())


def _values(raw: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in raw) if isinstance(raw, (list, tuple)) else ((float(raw),) if raw is not None else ())


def qnn_view(rows: Iterable[Mapping[str, object]], graph_nodes: Mapping[str, str] | None = None,
             clock: str | None = None, modules: Mapping[str, str] | None = None) -> QnnEtdump:
    """The QNN view of Inspector rows (CYCLES/CYCLES). `graph_nodes`: node name -> op, `modules`:
    node name -> the module it came from, both from the ETRecord."""
    rows = list(rows)
    ops: list[QnnOpEvent] = []
    summary: list[QnnSummaryEvent] = []
    unmapped: list[str] = []
    for r in rows:
        name = str(r.get("event_name", ""))
        if not r.get("is_delegated_op"):
            continue
        vals = _values(r.get("raw"))
        if io := _IO_EVENT.match(name):
            ops.append(QnnOpEvent(int(io.group("id")), None, vals, io=io.group("kind")))
        elif m := _OP_EVENT.match(name):
            node = m.group("node")
            op = graph_nodes.get(node) if (graph_nodes is not None and node) else None
            if graph_nodes is not None and node and op is None:
                unmapped.append(node)
            ops.append(QnnOpEvent(int(m.group("id")), node, vals, op,
                                  module=(modules or {}).get(node) if node else None))
        elif u := _UNIT.search(name):
            summary.append(QnnSummaryEvent(name[:u.start()].rstrip(), u.group("unit"), vals))
    report = analyse_rows(rows)
    cpu = [CpuOp(r.name, tuple(r.op_types), r.total) for r in report.not_delegated]
    calls = tuple(v for r in report.rows if r.name == "DELEGATE_CALL" for v in r.raw)
    method = tuple(v for r in report.rows if r.name == "Method::execute" for v in r.raw)
    return QnnEtdump(ops, summary, cpu, calls, method, graph_nodes is not None, unmapped, clock)


def graph_nodes_of(etrecord: Path) -> dict[str, str]:
    """Node name -> op of every call in the ETRecord's edge graphs (the `executorch` extra)."""
    return {name: op for name, (op, _) in graph_facts_of(etrecord).items()}


def graph_facts_of(etrecord: Path) -> dict[str, tuple[str, str]]:
    """Node name -> (op, the module it came from: `layers.1.down`, the innermost of its
    `nn_module_stack`, "" when none) of every call in the ETRecord's edge graphs."""
    try:
        from executorch.devtools.etrecord import parse_etrecord
    except ImportError:
        raise HarnessError("reading an ETRecord needs ExecuTorch: pip install 'harness[executorch]'") from None
    if not Path(etrecord).is_file():
        raise HarnessError(f"{etrecord}: ETRecord not found; pass the .etrecord written with the PTE")
    record = parse_etrecord(str(etrecord))
    programs = [record.edge_dialect_program] + list((record.graph_map or {}).values())
    out: dict[str, tuple[str, str]] = {}
    for ep in programs:
        graph = getattr(ep, "graph", None)
        for node in (graph.nodes if graph is not None else ()):
            if node.op == "call_function":
                stack = node.meta.get("nn_module_stack") or {}
                module = str(list(stack.values())[-1][0]) if stack else ""
                out.setdefault(node.name, (_op_name(node.target), module))
    return out


def _op_name(target: object) -> str:
    """`<EdgeOpOverload: aten.rms_norm.default>: schema = ...` -> `aten.rms_norm.default`."""
    text = str(target)
    m = re.match(r"<EdgeOpOverload: ([\w.]+)>", text)
    return m.group(1) if m else text


def analyse_qnn_etdump(etdump: Path, etrecord: Path | None = None, *, clock: str | None = None) -> QnnEtdump:
    rows = load_rows(etdump, etrecord, qnn=True)
    if etrecord is None:
        return qnn_view(rows, None, clock)
    facts = graph_facts_of(etrecord)
    return qnn_view(rows, {n: op for n, (op, _) in facts.items()}, clock, {n: m for n, (_, m) in facts.items() if m})


def format_qnn(view: QnnEtdump, top: int = 15) -> str:
    j = view.to_json(top)
    if not view.profiled:
        return f"{j['note']}; delegate calls ({RUNTIME_UNIT}): {j['delegate_calls']}"
    lines = [f"{j['qnn_ops']} QNN op events ({view.unit_label}), {j['qnn_io_events']} IO events; "
             f"ops total {j['op_cycles_total']:.0f} cycles, accelerator {j['accelerator_cycles']} cycles"]
    lines += [f"  {s.name} ({s.unit}): {sum(s.values):g}" for s in view.summary]
    lines.append(f"{'node':52} {'op':32} {'cycles':>12}")
    lines += [f"{(e['node'] or '(QNN-inserted) OpId_' + str(e['op_id']))[:52]:52} {(e['op'] or '?')[:32]:32} "
              f"{e['total']:12.0f}" for e in j["top_ops"]]
    lines.append("left on the CPU: " + (", ".join(c.name for c in view.cpu_ops) or "none"))
    if view.unmapped:
        lines.append(f"not in the ETRecord's graphs ({len(view.unmapped)}): " + ", ".join(view.unmapped[:8]))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    """`python -m harness.runners.executorch.qnn_profile ETDUMP [--etrecord F] [--emulator] [--json]`; exit 2 on bad input."""
    import argparse
    import json
    import sys

    ap = argparse.ArgumentParser(prog="python -m harness.runners.executorch.qnn_profile",
                                 description="QNN's per-op cycles and summary events in an ETDump of a QNN run.")
    ap.add_argument("etdump", type=Path)
    ap.add_argument("--etrecord", type=Path, help="the PTE's ETRecord: maps QNN's node names to the graph's ops")
    ap.add_argument("--emulator", action="store_true", help="measured on the host's HTP emulator (label the cycles)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    try:
        view = analyse_qnn_etdump(args.etdump, args.etrecord, clock="emulator" if args.emulator else None)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(view.to_json()) if args.json else format_qnn(view))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
