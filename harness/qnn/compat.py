"""Which QNN runtime loads which context binary: the measured rule and its table
(docs/qnn-compat.md, measured by `python -m harness.qnn.probe.compat` into compat.json).

The rule: a context binary loads iff the QAIRT release that built it (the build id in its header,
as libQnnSystem.so reads it) is not newer than the runtime's. Measured on the HTP emulator over
QAIRT 2.48.40 .. 2.51.0 (the x86 libraries of onnxruntime-qnn 2.4.0 .. 2.7.0); every cell agreed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.qnn.host import qairt_tuple

COMPAT_TABLE_PATH = Path(__file__).with_name("compat.json")


def loads_on(made_build: str | None, runtime_build: str | None) -> bool | None:
    """Whether a binary built by `made_build` loads on a `runtime_build` runtime (the rule above);
    None when either version is unknown."""
    made = qairt_tuple(made_build) if made_build else None
    runs = qairt_tuple(runtime_build) if runtime_build else None
    if made is None or runs is None:
        return None
    return made <= runs


@dataclass(frozen=True)
class CompatCell:
    """One binary tried on one runtime."""

    binary: str  # the file (a .pte's delegate as "model.pte#forward[0]")
    producer: str  # "ExecuTorch", "ONNX Runtime QNN EP", "context binary"
    soc_model: int | None
    built_with: str  # the QAIRT build in the binary's header
    runtime: str  # the runtime library's QAIRT build
    rc: int  # contextCreateFromBinary's answer: 0 loaded, 5000 a newer binary ...
    predicted: bool | None  # loads_on(built_with, runtime)

    @property
    def loaded(self) -> bool:
        return self.rc == 0

    @property
    def agrees(self) -> bool:
        return self.predicted is None or self.predicted == self.loaded


@dataclass(frozen=True)
class CompatTable:
    cells: tuple[CompatCell, ...]
    runtimes: tuple[str, ...]  # the QAIRT builds it was measured on
    provenance: str  # where and how it was measured

    def to_json(self) -> dict[str, object]:
        return {"rule": "a context binary loads iff its QAIRT is not newer than the runtime's",
                "runtimes": list(self.runtimes), "provenance": self.provenance,
                "cells": [asdict(c) for c in self.cells]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompatTable:
        return cls(tuple(CompatCell(**c) for c in data["cells"]), tuple(data["runtimes"]), str(data["provenance"]))

    @classmethod
    def read(cls, path: Path = COMPAT_TABLE_PATH) -> CompatTable:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))


__all__ = ["COMPAT_TABLE_PATH", "CompatCell", "CompatTable", "loads_on"]
