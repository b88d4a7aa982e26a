"""What a QNN format's ExecuTorch program weighs (harness/suite/executorch/weigh.py): the
.pte's bytes and how many of them are QNN context binaries (what the NPU runs), so a night shows
a program that grew, or one whose weight moved out of QNN, beside its verdict and across nights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, Fold, JsonObject, Row, json_int, json_object


@dataclass(frozen=True)
class ProgramSize:
    KEY: ClassVar[str] = "program_size"
    COLUMNS: ClassVar[tuple[Column, ...]] = (Column("program_kib", "REAL", Fold.MEDIAN),
                                             Column("program_qnn_share", "REAL", Fold.MEDIAN))

    program: str  # the .pte's file name
    size: int  # its bytes
    qnn_bytes: int  # the bytes of its QNN context binaries
    qnn_binaries: int  # how many (one per QnnBackend delegate)

    @property
    def qnn_share(self) -> float:
        return self.qnn_bytes / self.size if self.size else 0.0

    def describe(self) -> str:
        return (f"{self.program}: {self.size / 1024:.1f} KiB, {self.qnn_share:.0%} in {self.qnn_binaries} QNN "
                f"context binar{'y' if self.qnn_binaries == 1 else 'ies'}")

    def junit(self) -> dict[str, str | None]:
        return {"program_bytes": str(self.size), "program_qnn_bytes": str(self.qnn_bytes),
                "program_qnn_binaries": str(self.qnn_binaries), "program_qnn_share": f"{self.qnn_share:.3f}"}

    def rows(self) -> tuple[Row, ...]:
        return (Row("program", self.describe()),)

    def views(self) -> tuple[object, ...]:
        return ()

    def columns(self) -> dict[str, Cell]:
        return {"program_kib": round(self.size / 1024, 1), "program_qnn_share": round(self.qnn_share, 4)}

    def to_json(self) -> JsonObject:
        return {"program": self.program, "bytes": self.size, "qnn_bytes": self.qnn_bytes, "qnn_binaries": self.qnn_binaries}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "a program's size")
        size, qnn, n = json_int(raw.get("bytes")), json_int(raw.get("qnn_bytes")), json_int(raw.get("qnn_binaries"))
        if size is None or qnn is None or n is None:
            raise ValueError("a program's size without its byte counts")
        return cls(str(raw.get("program") or ""), size, qnn, n)
