"""Every QNN op's cycles in one profiled run (`qnn_executor_runner --profile_level 2`; on the host's
HTP emulator the same run-time option, harness/hostrt/executorch/backend_options.py): what the
history keeps night to night, so a night can name the ops that got slower than the last good
night (harness/report/op_history.py, docs/executorch-runner.md#per-op-cycles-night-to-night).

An op is its graph node's name (`aten_linear_default_5`; `OpId_N` for one QNN inserted), with
its op and the module it came from (`layers.1.down`) when the program's ETRecord was there to
say. Emulator cycles are not device cycles: `unit_label` travels with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, fmt3, json_object


@dataclass(frozen=True)
class OpCycle:
    node: str
    cycles: float  # the least of the run's calls (`--iteration N`): contention only ever adds
    calls: int = 1
    op: str = ""  # `aten.linear.default`, from the ETRecord
    module: str = ""  # `layers.1.down`, from the ETRecord

    def to_json(self) -> JsonObject:
        return {"node": self.node, "cycles": self.cycles, "calls": self.calls, "op": self.op, "module": self.module}


@dataclass(frozen=True)
class OpCyclesRun:
    """The history's per-op cycles table (report/op_history.py): one profiled program's ops."""

    program: str
    unit_label: str
    ops: tuple[OpCycle, ...]


@dataclass(frozen=True)
class OpCycles:
    KEY: ClassVar[str] = "op_cycles"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()  # every op's cycles: the history's own table (report/op_history.py)

    program: str  # the .pte's file name
    unit_label: str  # "cycles" or "cycles, emulator"
    profile_level: int  # the run's --profile_level
    ops: tuple[OpCycle, ...]  # in QNN's order

    def by_node(self) -> dict[str, OpCycle]:
        return {o.node: o for o in self.ops}

    @property
    def total(self) -> float:
        return float(sum(o.cycles for o in self.ops))

    def junit(self) -> dict[str, str | None]:
        return {"op_cycles_ops": str(len(self.ops)), "op_cycles_total": fmt3(self.total), "op_cycles_unit": self.unit_label}

    def rows(self) -> tuple[Row, ...]:
        return ()  # the page's per-op cycles plots against the last good night (report/op_plots.py)

    def views(self) -> tuple[object, ...]:
        return (OpCyclesRun(self.program, self.unit_label, self.ops),)

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return {"program": self.program, "unit_label": self.unit_label, "profile_level": self.profile_level,
                "ops": [o.to_json() for o in self.ops]}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "per-op cycles")
        ops = [json_object(o, "an op's cycles") for o in raw.get("ops") or []]
        return cls(str(raw.get("program") or ""), str(raw.get("unit_label") or "cycles"),
                   int(raw.get("profile_level") or 0),
                   tuple(OpCycle(str(o.get("node") or ""), float(o.get("cycles") or 0.0), int(o.get("calls") or 1),
                                 str(o.get("op") or ""), str(o.get("module") or "")) for o in ops))
