"""What a night leaves for replay and bisection once its reports are written: a repro bundle for
each failed cell (bundle.py) and, beside the history, each testcase's outcome with the night's
versions on every axis (harness/bisect/points.py: the good and bad points of a later bisection)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.inventory import DeviceSpec
from harness.lab import device_path
from harness.lab.plan import Plan
from harness.report import TestRecord


def night_versions(plan: Plan, devices: Sequence[DeviceSpec]) -> dict[tuple[str, str], str]:
    """(axis, model) -> the night's version: its inputs' commit, runtime folder, SDK root."""
    from harness.bisect import inputs_commit

    out: dict[tuple[str, str], str] = {}
    for build in plan.exports.builds if plan.exports else ():
        commit = inputs_commit(build.inputs)
        if commit:
            out[("inputs", build.model)] = commit
    one = devices[0] if devices else None
    for entry in plan.entries():
        options = {**plan.options, **entry.model.options, **entry.suite.options}
        for axis, key in (("runtime", "runtime_dir"), ("qairt", "qnn_sdk")):
            if options.get(key) and one is not None:
                out[(axis, entry.model.name)] = str(device_path(str(options[key]), one))
    return out


def after_night(records: list[TestRecord], plan: Plan, devices: Sequence[DeviceSpec], out_dir: Path, *, run_id: str,
                started_at: float, history_db: Path, copy_files: bool = False) -> list[str]:
    """Bundles and bisection points; returns what could not be written, in words (never raises
    for the host's faults: the night's own results are already reported)."""
    from harness.bisect import record_night
    from harness.replay.bundle import write_bundles

    problems = []
    try:
        write_bundles(records, plan, {d.name: d for d in devices}, out_dir, copy_files=copy_files)
    except (HarnessError, OSError) as exc:
        problems.append(f"repro bundles not written: {exc}")
    try:
        record_night(history_db, run_id, started_at, records, night_versions(plan, devices))
    except (HarnessError, OSError, sqlite3.Error) as exc:
        problems.append(f"bisection points not recorded in {history_db}: {exc}")
    return problems
