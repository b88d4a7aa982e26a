"""An ExecuTorch run's ETDump summary (harness.suite.executorch.profile over
runners/executorch/etdump.py): how many calls and ops, how many delegated and to which backends,
the slowest op left on the CPU; the summary as written kept as its JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, json_int, json_object, text_of


@dataclass(frozen=True)
class EtdumpSummary:
    KEY: ClassVar[str] = "etdump"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    unit: str  # the Inspector's time unit ("ms")
    calls: int | None
    ops: int | None
    delegated: int | None
    backends: tuple[str, ...]  # the delegates that ran ops, in the summary's order
    not_delegated: tuple[str, ...]  # ops left on the CPU, slowest first
    detail: JsonObject = field(default_factory=dict, compare=False)  # the summary as written

    @property
    def slowest_not_delegated(self) -> str:
        return self.not_delegated[0] if self.not_delegated else ""

    def junit(self) -> dict[str, str | None]:
        return {"etdump_calls": text_of(self.calls), "etdump_ops": text_of(self.ops),
                "etdump_delegated": text_of(self.delegated), "etdump_unit": self.unit,
                "etdump_backends": ",".join(self.backends), "etdump_top_not_delegated": self.slowest_not_delegated}

    def rows(self) -> tuple[Row, ...]:
        cpu = f"; slowest on the CPU: {self.slowest_not_delegated}" if self.slowest_not_delegated else ""
        return (Row("ETDump", f"{self.delegated} of {self.ops} ops delegated ({', '.join(self.backends) or 'none'})"
                    f" in {self.calls} calls{cpu}"),)

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return dict(self.detail)

    @classmethod
    def of_json(cls, raw: Any) -> Self:
        raw = json_object(raw, "an ETDump summary")
        backends, slow = raw.get("backends") or {}, raw.get("not_delegated") or []
        if not isinstance(backends, dict | list) or not isinstance(slow, list):
            raise ValueError("an ETDump summary's backends or not_delegated is malformed")
        return cls(str(raw.get("unit") or ""), json_int(raw.get("calls")), json_int(raw.get("ops")),
                   json_int(raw.get("delegated")),
                   tuple(str(b) for b in backends), tuple(str(n) for n in slow), dict(raw))
