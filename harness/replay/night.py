"""What a night leaves for replay once its reports are written: a repro bundle for each failed
cell (bundle.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.inventory import DeviceSpec
from harness.lab.plan import Plan
from harness.report import TestRecord


def after_night(records: list[TestRecord], plan: Plan, devices: Sequence[DeviceSpec], out_dir: Path, *,
                copy_files: bool = False) -> list[str]:
    """The night's bundles; returns what could not be written, in words (never raises for the
    host's faults: the night's own results are already reported)."""
    from harness.replay.bundle import write_bundles

    try:
        write_bundles(records, plan, {d.name: d for d in devices}, out_dir, copy_files=copy_files)
    except (HarnessError, OSError) as exc:
        return [f"repro bundles not written: {exc}"]
    return []
