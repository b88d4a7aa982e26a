"""Where a record sits in a run (the lab's bookkeeping, and a pytest session's run id): the run,
its plan entry and repeat, the link kind it ran over, and for a retried entry the attempt and
the fault it was retried after. Written as top-level keys of the record's extras, as they always
were (a spread family: `KEYS`); only those given are written."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, Tone, json_object, text_of

_TYPES: dict[str, type] = {"run_id": str, "transport": str, "plan_entry": str, "repeat": int, "attempt": int,
                           "retried_after": str}


@dataclass(frozen=True)
class LabRun:
    KEY: ClassVar[str] = "lab_run"  # in memory only: its JSON is its KEYS
    KEYS: ClassVar[tuple[str, ...]] = tuple(_TYPES)
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    run_id: str | None = None  # the night (or pytest session) that wrote the record
    transport: str | None = None  # the link kind (adb, ssh, local; "host" for an export)
    plan_entry: str | None = None
    repeat: int | None = None  # the plan's repeat, when it repeats
    attempt: int | None = None  # the attempt a lost device was quarantined in
    retried_after: str | None = None  # the transport fault a retried test ran again after

    def filled(self, **values: Any) -> LabRun:
        """These values where this has none (a value already stamped stays)."""
        return replace(self, **{k: v for k, v in values.items() if getattr(self, k) is None and v is not None})

    def junit(self) -> dict[str, str | None]:
        # The run and its link are the device's suite properties (report/junit.py suite_properties).
        return {"repeat": text_of(self.repeat), "attempt": text_of(self.attempt), "retried_after": self.retried_after}

    def rows(self) -> tuple[Row, ...]:
        return (Row("retried", f"after {self.retried_after}", Tone.WARN),) if self.retried_after else ()

    def views(self) -> tuple[object, ...]:
        return ()

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "a record's run bookkeeping")
        for key, value in raw.items():
            kind = _TYPES.get(key)
            if kind is None or isinstance(value, bool) or not isinstance(value, kind):
                raise ValueError(f"a record's {key} is {value!r}")  # kept free-form, as written
        return cls(**raw)
