"""What a night leaves behind: its result (`NightResult`), the counts the console's last line
and night.json give (`NightCounts`), night.json itself (`write_meta`, rewritten atomically at
the start and the end of a night) and the reports: JUnit, the SQLite history with its
regression check, HTML with plots (`write_night_reports`). Every file is written atomically
(harness/hostfiles.py); a report that cannot be written is a problem named in the result,
and the others are still written from the night's records."""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.hostfiles import write_atomic, write_error
from harness.inventory import DeviceSpec
from harness.lab.context import DeviceOutcome
from harness.lab.plan import Plan
from harness.outcomes import FailureClass, NightOutcome, Status
from harness.report import TestRecord, read_records

if TYPE_CHECKING:
    from harness.report import Regression


@dataclass(frozen=True)
class NightCounts:
    """What a night delivered, as the console's last line and night.json say it."""

    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    quarantined: int = 0  # devices
    flaky: int = 0  # results that passed on the retry after a link fault
    busy: int = 0  # devices skipped because another run held them
    regressions: int = 0
    internal_errors: int = 0  # results that are a harness bug (failure class internal-error)

    @classmethod
    def of(cls, records: list[TestRecord], devices: dict[str, DeviceOutcome], regressions: int) -> NightCounts:
        by = Counter(r.status for r in records)
        return cls(passed=by[Status.PASSED], failed=by[Status.FAILED], error=by[Status.ERROR],
                   skipped=by[Status.SKIPPED],
                   quarantined=sum(o.status is NightOutcome.QUARANTINED for o in devices.values()),
                   flaky=sum(1 for r in records if r.flaky),
                   busy=sum(o.status is NightOutcome.BUSY for o in devices.values()),
                   regressions=regressions,
                   internal_errors=sum(1 for r in records if r.failure_class is FailureClass.INTERNAL_ERROR))

    def line(self) -> str:
        """`N passed, N failed, N error, N skipped, N quarantined, N flaky` (+ busy, regressions)."""
        parts = [f"{self.passed} passed", f"{self.failed} failed", f"{self.error} error", f"{self.skipped} skipped",
                 f"{self.quarantined} quarantined", f"{self.flaky} flaky"]
        parts += [f"{self.busy} busy"] if self.busy else []
        parts += [f"{self.regressions} regressions"] if self.regressions else []
        return ", ".join(parts)


@dataclass
class NightResult:
    run_id: str
    plan_name: str
    out_dir: Path
    records_path: Path
    started_at: float
    wall_s: float = 0.0
    interrupted: bool = False
    devices: dict[str, DeviceOutcome] = field(default_factory=dict)
    reports: dict[str, Path] = field(default_factory=dict)  # junit, junit:<device>, history, html
    regressions: list[Regression] = field(default_factory=list)
    counts: NightCounts = field(default_factory=NightCounts)
    report_problems: list[str] = field(default_factory=list)  # reports that could not be written

    def records(self) -> list[TestRecord]:
        """This night's records. records.jsonl is appended to (an --out folder reused night after
        night keeps every night's lines), so the run id tells this night's apart."""
        return [r for r in read_records(self.records_path) if r.run_id == self.run_id]


def write_night_reports(
    records: list[TestRecord],
    out_dir: Path,
    *,
    run_id: str,
    plan_name: str,
    started_at: float,
    history_db: Path,
    nights: int = 7,
    perf_drop_pct: float = 15.0,
    min_nights: int = 3,
    record_history: bool = True,
) -> tuple[dict[str, Path], list[Regression], list[str]]:
    """JUnit (per device + merged), SQLite history with the regression check, HTML + plots.
    An interrupted night is reported but not recorded in the history (it would skew baselines).
    Each is written on its own: one that fails (a full disk, a history damaged during the
    night) is a line in the returned problems, and the rest are still written from `records`
    (the HTML then without trends). Returns (paths, regressions, problems)."""
    from harness.report import write_junit

    # The JUnit files are written while the history and the HTML page are: JUnit waits on the
    # disk (each file fsync'd), the page on the CPU; one after the other they were half of a
    # stopped 1 000-device night's reports (docs/lab-scale.md).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-junit") as junit_writer:
        junit = junit_writer.submit(write_junit, records, out_dir)
        others, regressions, problems = _history_and_html(
            records, out_dir, run_id=run_id, plan_name=plan_name, started_at=started_at, history_db=history_db,
            nights=nights, perf_drop_pct=perf_drop_pct, min_nights=min_nights, record_history=record_history)
        paths: dict[str, Path] = {}
        try:
            paths.update(junit.result())
        except (HarnessError, OSError) as exc:
            problems.insert(0, f"JUnit not written: {_said(exc)}")
    return {**paths, **others}, regressions, problems


def _history_and_html(records: list[TestRecord], out_dir: Path, *, run_id: str, plan_name: str, started_at: float,
                      history_db: Path, nights: int, perf_drop_pct: float, min_nights: int,
                      record_history: bool) -> tuple[dict[str, Path], list[Regression], list[str]]:
    from harness.report import History, write_html

    paths: dict[str, Path] = {}
    problems: list[str] = []
    regressions: list[Regression] = []
    hist: History | None = None
    try:
        hist = History(history_db)
        if record_history:
            hist.add_night(run_id, records, started_at=started_at, plan=plan_name)
            regressions = hist.regressions(run_id, nights=nights, perf_drop_pct=perf_drop_pct, min_nights=min_nights)
        paths["history"] = Path(history_db)
    except (HarnessError, OSError, sqlite3.Error) as exc:
        problems.append(f"history not updated: {_said(exc, history_db)}; this night's results are in "
                        f"{out_dir / 'records.jsonl'}")
        if hist is not None:
            hist.close()
        hist = None
    try:
        title = f"{plan_name} - {run_id}"
        try:
            paths["html"] = write_html(records, out_dir, title=title, history=hist, regressions=regressions,
                                       night_id=run_id if record_history else None)
        except sqlite3.Error as exc:  # the history broke while plotting: the page without trends
            problems.append(f"trend plots not drawn: {_said(exc, history_db)}")
            paths["html"] = write_html(records, out_dir, title=title, regressions=regressions)
    except (HarnessError, OSError, sqlite3.Error) as exc:
        problems.append(f"HTML report not written: {_said(exc)}")
    finally:
        if hist is not None:
            hist.close()
    return paths, regressions, problems


def _said(exc: BaseException, path: Path | None = None) -> str:
    """One line for a report that failed: a HarnessError's own message, an OSError with its path."""
    from harness.report import disk_full_message, is_disk_full

    if isinstance(exc, sqlite3.Error) and is_disk_full(exc):
        return disk_full_message(Path(path or "?"), exc)
    if isinstance(exc, OSError):
        return str(write_error(Path(exc.filename or path or "?"), exc))
    if isinstance(exc, sqlite3.Error):
        return f"{path}: {exc}; move the file aside (`mv {path} {path}.broken`) to start a new history"
    return str(exc)


def write_meta(out_dir: Path, result: NightResult, plan: Plan, devices: list[DeviceSpec]) -> None:
    meta = {
        "run_id": result.run_id, "plan": str(plan.path), "plan_name": plan.name, "started_at": result.started_at,
        "wall_s": result.wall_s, "interrupted": result.interrupted, "host_pid": os.getpid(),
        "devices": [d.name for d in devices],
        # vars, not asdict: an outcome is flat, and asdict's deep copy of 10 000 took 0.8 s of a stop.
        "outcomes": {k: dict(vars(v)) for k, v in result.devices.items()},
        "reports": {k: str(v) for k, v in result.reports.items()},
        "counts": asdict(result.counts),
        "report_problems": list(result.report_problems),
    }
    write_atomic(out_dir / "night.json", night_json(meta))


def night_json(meta: Mapping[str, object]) -> str:
    """night.json's text: a key a line, each device's outcome a line of its own. Not
    `json.dumps(indent=2)`: any indent makes json use its pure-Python encoder, 0.15-0.25 s of
    a 10 000-device night's end (night.json is written twice); this is json's C encoder a line."""
    enc = json.JSONEncoder()  # no indent: the C encoder

    def line(key: str, value: object) -> str:
        if key == "outcomes" and isinstance(value, dict) and value:
            inner = ",\n".join(f"    {enc.encode(name)}: {enc.encode(o)}" for name, o in value.items())
            return f"  {enc.encode(key)}: {{\n{inner}\n  }}"
        return f"  {enc.encode(key)}: {enc.encode(value)}"

    return "{\n" + ",\n".join(line(k, v) for k, v in meta.items()) + "\n}\n"
