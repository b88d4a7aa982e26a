"""What a record's times mean: measured on the device, or on the host's HTP emulator (not device
speed; the reports say so beside every figure). Its JSON is the one word the record always held."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, Row


class Clock(StrEnum):
    DEVICE = "device"
    EMULATOR = "emulator"


@dataclass(frozen=True)
class TimedOn:
    """What a record's figures were measured on when it is not the device ("emulator"): said beside each."""

    label: str


@dataclass(frozen=True)
class Timing:
    KEY: ClassVar[str] = "timing"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    clock: Clock

    @property
    def emulated(self) -> bool:
        return self.clock is Clock.EMULATOR

    def junit(self) -> dict[str, str | None]:
        return {"timing": self.clock.value}

    def rows(self) -> tuple[Row, ...]:
        return ()  # said beside every figure it qualifies ("decode 12.0 tok/s (emulator)"): its view

    def views(self) -> tuple[object, ...]:
        return (TimedOn(self.clock.value),) if self.emulated else ()

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> str:
        return self.clock.value

    @classmethod
    def of_json(cls, raw: object) -> Self:
        if not isinstance(raw, str):
            raise TypeError("a record's timing is a word")
        return cls(Clock(raw))
