"""An ExecuTorch run's ETDump summary (harness.suite.executorch.profile over
runners/executorch/etdump.py): how many calls and ops, how many delegated and to which backends
(each backend's time by phase), the ops left on the CPU (slowest first), the ops that cost nothing,
and the ops' and the method's time by phase; its JSON is the summary's keys, as the profile check
picks them (suite/executorch/profile.py SUMMARY_KEYS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from harness.evidence.base import (
    Cell,
    Column,
    JsonObject,
    Row,
    json_int,
    json_number,
    json_object,
    json_texts,
    text_of,
)


@dataclass(frozen=True)
class Phases:
    """A time split into the prefill call(s) and the decode calls, in the summary's unit."""

    prefill: float
    decode: float

    def to_json(self) -> JsonObject:
        return {"prefill": self.prefill, "decode": self.decode}

    @classmethod
    def of_json(cls, raw: object, what: str) -> Phases:
        r = json_object(raw, what)
        pre, dec = json_number(r.get("prefill")), json_number(r.get("decode"))
        if pre is None or dec is None:
            raise ValueError(f"{what} without its prefill and decode times")
        return cls(pre, dec)


@dataclass(frozen=True)
class BackendTime:
    """One delegate backend: its DELEGATE_CALL time (what the method waited for), by phase, and its ops."""

    name: str
    calls_time: float
    prefill: float
    decode: float
    ops: float  # its op rows (a count, written as a number of the table)

    def to_json(self) -> JsonObject:
        return {"calls_time": self.calls_time, "prefill": self.prefill, "decode": self.decode, "ops": self.ops}

    @classmethod
    def of_json(cls, name: str, raw: object) -> BackendTime:
        r = json_object(raw, f"the ETDump summary's backend {name}")
        values = [json_number(r.get(k)) for k in ("calls_time", "prefill", "decode", "ops")]
        if any(v is None for v in values):
            raise ValueError(f"the ETDump summary's backend {name} lacks a time")
        calls_time, prefill, decode, ops = (float(v or 0.0) for v in values)
        return cls(name, calls_time, prefill, decode, ops)


@dataclass(frozen=True)
class EtdumpSummary:
    KEY: ClassVar[str] = "etdump"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    unit: str  # the Inspector's time unit ("ms", "cycles")
    calls: int | None
    ops: int | None
    delegated: int | None
    backends: tuple[BackendTime, ...]  # the delegates that ran ops
    not_delegated: tuple[str, ...]  # ops left on the CPU, slowest first
    zero_cost: tuple[str, ...] = ()  # ops whose every call cost nothing measurable
    zero_cost_decode: tuple[str, ...] = ()  # ... in every decode call
    phases: Phases = Phases(0.0, 0.0)  # the ops' time by phase
    method: Phases = Phases(0.0, 0.0)  # Method::execute's time by phase

    @property
    def slowest_not_delegated(self) -> str:
        return self.not_delegated[0] if self.not_delegated else ""

    def junit(self) -> dict[str, str | None]:
        return {"etdump_calls": text_of(self.calls), "etdump_ops": text_of(self.ops),
                "etdump_delegated": text_of(self.delegated), "etdump_unit": self.unit,
                "etdump_backends": ",".join(b.name for b in self.backends),
                "etdump_top_not_delegated": self.slowest_not_delegated}

    def rows(self) -> tuple[Row, ...]:
        cpu = f"; slowest on the CPU: {self.slowest_not_delegated}" if self.slowest_not_delegated else ""
        names = ", ".join(b.name for b in self.backends) or "none"
        return (Row("ETDump", f"{self.delegated} of {self.ops} ops delegated ({names}) in {self.calls} calls{cpu}"),)

    def views(self) -> tuple[object, ...]:
        return ()

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return {"unit": self.unit, "calls": self.calls, "ops": self.ops, "delegated": self.delegated,
                "backends": {b.name: b.to_json() for b in self.backends}, "not_delegated": list(self.not_delegated),
                "zero_cost": list(self.zero_cost), "zero_cost_decode": list(self.zero_cost_decode),
                "phases": self.phases.to_json(), "method": self.method.to_json()}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        r = json_object(raw, "an ETDump summary")
        backends = json_object(r.get("backends") or {}, "an ETDump summary's backends")
        return cls(str(r.get("unit") or ""), json_int(r.get("calls")), json_int(r.get("ops")), json_int(r.get("delegated")),
                   tuple(BackendTime.of_json(str(n), b) for n, b in sorted(backends.items())),
                   json_texts(r.get("not_delegated"), "an ETDump summary's not_delegated"),
                   json_texts(r.get("zero_cost"), "an ETDump summary's zero_cost"),
                   json_texts(r.get("zero_cost_decode"), "an ETDump summary's zero_cost_decode"),
                   Phases.of_json(r.get("phases"), "an ETDump summary's phases"),
                   Phases.of_json(r.get("method"), "an ETDump summary's method time"))
