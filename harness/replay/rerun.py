"""`harness replay BUNDLE [--device NAME]`: the bundle's cell run again, on its device or another
of the same SoC, and whether the outcome reproduced (status and failure class the same).

Before a byte moves, every pushed file the bundle names is hashed again on the host: one that is
missing or whose sha256 changed refuses the replay naming each such file (exit 4: the bundle no
longer describes what would run)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.inventory import Inventory
from harness.lab import UsageError
from harness.provision import sha256_file
from harness.replay.bundle import BUNDLE_FILE, FORMAT
from harness.replay.cell import Cell, run_cell
from harness.report import TestRecord


class BundleRefused(UsageError):
    """The bundle cannot be replayed as it stands (exit 4): changed files, another SoC, unreadable."""


def load_bundle(path: Path) -> tuple[Path, dict[str, Any]]:
    file = path / BUNDLE_FILE if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleRefused(f"{file}: not a readable repro bundle ({exc}); give the bundle's folder or its "
                            f"{BUNDLE_FILE}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleRefused(f"{file}: not a {FORMAT} bundle")
    return file.parent, data


def changed_files(data: dict[str, Any]) -> list[str]:
    """Each pushed file whose host copy is gone or no longer has the bundle's sha256, in words."""
    out = []
    for f in data.get("files") or []:
        host = f.get("host") or ""
        if not host:
            continue  # a file provisioning found outside the folders the bundle names: not checkable
        path = Path(host)
        if not path.is_file():
            out.append(f"{host} ({f['set']} file {f['rel']}) is missing")
        elif sha256_file(path) != f["sha256"]:
            out.append(f"{host} ({f['set']} file {f['rel']}) changed: sha256 {sha256_file(path)[:16]}..., the bundle "
                       f"has {f['sha256'][:16]}...")
    return out


@dataclass
class Replay:
    bundle: Path
    device: str
    expected: dict[str, object]
    record: TestRecord | None
    why_none: str = ""

    @property
    def reproduced(self) -> bool:
        rec = self.record
        if rec is None:
            return False
        got_class = rec.failure_class.value if rec.failure_class else ""
        return bool(rec.status.value == self.expected["status"] and got_class == self.expected["failure_class"])

    def line(self) -> str:
        want = f"{self.expected['status']} {self.expected['failure_class']}".strip()
        if self.record is None:
            return f"replay on {self.device}: NOT reproduced: the cell gave no result ({self.why_none})"
        got = f"{self.record.status.value} {self.record.failure_class.value if self.record.failure_class else ''}".strip()
        word = "reproduced" if self.reproduced else "NOT reproduced"
        return f"replay on {self.device}: {word}: {got} (the bundle: {want}): {self.record.message}"


def replay(bundle_path: Path, inventory: Inventory, device: str | None, out_dir: Path) -> Replay:
    folder, data = load_bundle(bundle_path)
    changed = changed_files(data)
    if changed:
        raise BundleRefused(f"{folder}: refused, the files it ran no longer match their sha256: " + "; ".join(changed)
                            + "; replay needs the bytes the night ran (or a new bundle from a new night)")
    name = device or str(data["device"]["name"])
    spec = inventory.get(name)
    want_soc = str(data["device"]["soc_model"])
    if spec.soc_model != want_soc:
        raise BundleRefused(f"{folder}: the cell ran on {data['device']['name']} ({want_soc}); {name} is a "
                            f"{spec.soc_model}: replay on a device of the same SoC")
    cell = Cell.of_json(data["cell"])
    run = run_cell(cell, inventory, name, out_dir)
    return Replay(folder, name, data["verdict"], run.record, run.why_none)
