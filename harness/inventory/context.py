"""How the inventory's parsers word a problem (harness/inventory/load.py and its parts): one
InventoryError that always names the file, the device and the key, and says what to do."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.errors import InventoryError
from harness.validation import typed_get


class Ctx:
    """Builds messages that always say file, device and key."""

    def __init__(self, path: Path, device: str | None = None):
        self.path, self.device = path, device

    def fail(self, key: str | None, problem: str, fix: str) -> InventoryError:
        where = str(self.path)
        if self.device is not None:
            where += f": device {self.device!r}"
        if key:
            where += f", key {key!r}"
        return InventoryError(f"{where}: {problem}; {fix}")


def want(ctx: Ctx, data: Mapping[str, object], key: str, kind: type | tuple[type, ...], *, required: bool = False,
         default: object = None) -> Any:
    return typed_get(ctx, data, key, kind, default=default, required=required,
                     missing_fix=f"add `{key}:` to this device")
