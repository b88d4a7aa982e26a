"""A bisection's good and bad points from the history: the last night a testcase passed on a
device and the first night after it that it failed, with each night's version on every axis.

The history's own rows are per (device, model, pair); a bisection needs the testcase and what
ran: two tables of their own in the same database, written after each night's reports
(`record_night`): `testcase_nights` (night, device, testcase, status, failure class) and
`night_versions` (night, axis, model, version: the inputs repository's commit, the runtime
folder, the SDK root)."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.bisect.axes import AxisKind
from harness.inventory import DeviceSpec
from harness.lab import UsageError, device_path
from harness.lab.plan import Plan
from harness.outcomes import Status
from harness.report import TestRecord
from harness.verdict import is_bad

SCHEMA = """
CREATE TABLE IF NOT EXISTS testcase_nights (
    night_id TEXT NOT NULL, started_at REAL NOT NULL, device TEXT NOT NULL, testcase TEXT NOT NULL,
    status TEXT NOT NULL, failure_class TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (night_id, device, testcase));
CREATE TABLE IF NOT EXISTS night_versions (
    night_id TEXT NOT NULL, axis TEXT NOT NULL, model TEXT NOT NULL DEFAULT '', version TEXT NOT NULL,
    PRIMARY KEY (night_id, axis, model));
"""


def inputs_commit(inputs: Iterable[Path]) -> str | None:
    """The commit a build's inputs were at (None: not in a git repository, or changed since it)."""
    paths = list(inputs)
    if not paths:
        return None
    where = paths[0] if paths[0].is_dir() else paths[0].parent
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30)
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", *map(str, paths)],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0 or dirty.returncode != 0 or dirty.stdout.strip():
        return None  # uncommitted changes: that night's inputs are no commit
    return head.stdout.strip() or None


def night_versions(plan: Plan, devices: Sequence[DeviceSpec]) -> dict[tuple[str, str], str]:
    """(axis, model) -> the night's version: its inputs' commit, runtime folder, SDK root."""
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


def record_night(db: Path, night_id: str, started_at: float, records: Iterable[TestRecord],
                 versions: Mapping[tuple[str, str], str]) -> None:
    """The night's testcases and versions ((axis, model) -> version) into `db`."""
    con = sqlite3.connect(db)
    try:
        with con:
            con.executescript(SCHEMA)
            con.executemany("INSERT OR REPLACE INTO testcase_nights VALUES (?, ?, ?, ?, ?, ?)",
                            [(night_id, started_at, r.device, r.name, r.status.value,
                              r.failure_class.value if r.failure_class else "") for r in records])
            con.executemany("INSERT OR REPLACE INTO night_versions VALUES (?, ?, ?, ?)",
                            [(night_id, axis, model, v) for (axis, model), v in versions.items()])
    finally:
        con.close()


@dataclass(frozen=True)
class Points:
    good: str
    bad: str
    good_night: str
    bad_night: str
    failure_class: str | None

    def describe(self) -> str:
        return (f"passed on night {self.good_night} ({self.good}), first failed on night {self.bad_night} "
                f"({self.bad}, {self.failure_class or 'no class'})")


def points_from_history(db: Path, device: str, testcase: str, axis: AxisKind) -> Points:
    """The last night `testcase` passed on `device` and the first failing night after it, as
    versions of `axis`."""
    if not db.is_file():
        raise UsageError(f"harness bisect --from-history {db}: no such history database")
    con = sqlite3.connect(db)
    try:
        con.executescript(SCHEMA)
        rows = con.execute("SELECT night_id, status, failure_class FROM testcase_nights WHERE device = ? AND "
                           "testcase = ? ORDER BY started_at", (device, testcase)).fetchall()
        good = bad = None
        for night, text, cls in rows:
            status = Status(text)
            if status is Status.PASSED:
                good, bad = night, None
            elif is_bad(status) and good is not None and bad is None:
                bad = (night, cls)
        if good is None or bad is None:
            raise UsageError(f"{db}: no night where {testcase} passed on {device} followed by one where it failed; "
                             "give --good and --bad")

        def version(night: str) -> str:
            row = con.execute("SELECT version FROM night_versions WHERE night_id = ? AND axis = ? ORDER BY model",
                              (night, axis.value)).fetchone()
            if row is None:
                raise UsageError(f"{db}: night {night} recorded no {axis} version; give --good and --bad")
            return str(row[0])

        return Points(version(good), version(bad[0]), good, bad[0], bad[1] or None)
    finally:
        con.close()
