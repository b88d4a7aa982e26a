"""What a verdict ran on (docs/placement.md#provenance): the tier (the phone's NPU, the host's
HTP emulator, a CPU), the runtime's QAIRT build, and the sha256 of the program and of each QNN
context binary it ran, so a CPU or emulator pass is never read as the NPU's and a verdict names
the bytes it judged."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, Fold, JsonObject, Row, json_object


class Tier(StrEnum):
    NPU = "npu"  # a device's own HTP
    EMULATOR = "emulator"  # the HTP emulator inside the host's QAIRT x86 libraries
    CPU = "cpu"  # no HTP: a CPU runtime or a CPU export


@dataclass(frozen=True)
class RanOn:
    """The page's "where it ran": the tier a record ran on and the runtime's QAIRT build ("" when unread)."""

    tier: Tier
    qairt: str = ""


@dataclass(frozen=True)
class Provenance:
    KEY: ClassVar[str] = "provenance"
    COLUMNS: ClassVar[tuple[Column, ...]] = (Column("tier", "TEXT", Fold.DISTINCT), Column("qairt", "TEXT", Fold.DISTINCT),
                                             Column("program_sha256", "TEXT", Fold.DISTINCT))

    tier: Tier
    qairt: str | None = None  # the runtime's QAIRT build id, when it has one and it was read
    program_sha256: str | None = None
    binaries_sha256: tuple[str, ...] = ()  # each context binary the program or export carries

    def junit(self) -> dict[str, str | None]:
        return {"tier": self.tier.value, "qairt": self.qairt, "program_sha256": self.program_sha256,
                "binaries_sha256": ",".join(self.binaries_sha256)}

    def rows(self) -> tuple[Row, ...]:
        return ()  # the cell's tier badges and QAIRT: its view

    def views(self) -> tuple[object, ...]:
        return (RanOn(self.tier, self.qairt or ""),)

    def columns(self) -> dict[str, Cell]:
        return {"tier": self.tier.value, "qairt": self.qairt, "program_sha256": self.program_sha256}

    def to_json(self) -> JsonObject:
        return {"tier": self.tier.value, "qairt": self.qairt, "program_sha256": self.program_sha256,
                "binaries_sha256": list(self.binaries_sha256)}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "a provenance")
        bins = raw.get("binaries_sha256") or []
        if not isinstance(bins, list):
            raise ValueError("binaries_sha256 is not a list")
        qairt, program = raw.get("qairt"), raw.get("program_sha256")
        return cls(Tier(raw["tier"]), qairt if isinstance(qairt, str) else None,
                   program if isinstance(program, str) else None, tuple(str(b) for b in bins))
