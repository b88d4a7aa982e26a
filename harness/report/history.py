"""Results history in one SQLite file, and the nightly regression check.

One row per (night, device, model, backend pair): pass/fail, failure classes, median
prefill/decode tokens/s and load time over the night's tests for that key. The check
compares tonight with the median of the last N nights: a speed drop (or load-time rise)
beyond a threshold, and a failure class not seen for that key in those nights, are flagged.

Teacher-forced agreement with the CPU reference (harness.runners.logits_diff) is kept per key
too: the median mean KL, NLL gap (B - A) and share of disagreeing steps over the night's
prompts. Each nightly verdict has a fixed threshold, so a slow drift can stay under it night
after night, and a median of the last few nights moves along with it. The agreement baseline
is therefore the median of the *oldest* `min_nights` nights within a long window
(`agreement_nights`, 30): a rise beyond `AGREEMENT_METRICS` (an absolute floor, a relative
share) over that is flagged, however slowly it came (docs/logits-diff.md). An export's
record (backend pair empty) gives its row the medians and worst KL over all its prompts and
its verdict; a verdict worse than on each past night is flagged too.
"""

from __future__ import annotations

import errno
import json
import sqlite3
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import harness.report.op_history as op_history
from harness.errors import HarnessError
from harness.evidence import COLUMNS, Cell, Fold
from harness.outcomes import Status
from harness.pairs import BackendPair
from harness.report.records import TestRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS nights (
    night_id TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    plan TEXT NOT NULL DEFAULT '',
    recorded_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    night_id TEXT NOT NULL REFERENCES nights(night_id) ON DELETE CASCADE,
    device TEXT NOT NULL,
    soc TEXT NOT NULL DEFAULT '',
    arch TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    backend_pair TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,              -- passed | failed | skipped
    tests INTEGER NOT NULL,
    passed INTEGER NOT NULL,
    failed INTEGER NOT NULL,           -- failed + error records
    skipped INTEGER NOT NULL,
    flaky INTEGER NOT NULL,
    failure_classes TEXT NOT NULL,     -- JSON list, sorted
    prefill_tps REAL,
    decode_tps REAL,
    load_s REAL,
    -- then each evidence family's columns (harness.evidence COLUMNS), added when absent
    PRIMARY KEY (night_id, device, model, backend_pair)
);
CREATE INDEX IF NOT EXISTS results_key ON results (device, model, backend_pair);
"""

# metric -> True when a higher value is better
PERF_METRICS = {"decode_tps": True, "prefill_tps": True, "load_s": False}
# Teacher-forced metric -> (absolute rise that is never noise, relative rise): a rise beyond
# max(absolute, relative * baseline) over the past nights' median is a regression. The floors
# sit at a fifth of the nightly drift thresholds (harness.runners.logits_diff.Thresholds:
# KL 0.05, NLL gap 0.2), where a healthy export's run-to-run spread is 0 (the runs are greedy
# and deterministic: the same binary on the same export prints the same numbers).
# The worst prompt's KL: a fifth of the per-prompt drift line (0.15).
AGREEMENT_METRICS: dict[str, tuple[float, float]] = {
    "tf_mean_kl": (0.01, 0.5), "tf_nll_gap": (0.04, 0.5), "tf_disagree_rate": (0.05, 0.5),
    "tf_worst_kl": (0.03, 0.5)}
# The evidence families' columns (each family declares its own: harness/evidence/), added to a
# history written before a column existed (NULL for the old nights).
ADDED_COLUMNS = {col.name: col.sql for col in COLUMNS}
# An export's verdict worse than in every past night is a regression (a warning first seen too).
EXPORT_VERDICT_RANK = {"not-run": 0, "pass": 1, "warn": 2, "fail": 3}


@dataclass(frozen=True)
class Regression:
    kind: str  # "perf" | "new-failure" | "agreement" | "export-verdict" | "localize" | "op-cycles"
    device: str
    model: str
    backend_pair: BackendPair | None
    metric: str  # a PERF_METRICS key, or the new failure class
    tonight: float | None = None
    baseline: float | None = None  # median of the past nights
    nights: int = 0  # how many past nights the baseline covers

    @property
    def change_pct(self) -> float | None:
        if self.tonight is None or not self.baseline:
            return None
        return (self.tonight - self.baseline) / self.baseline * 100.0

    def describe(self) -> str:
        where = "/".join(p for p in (self.device, self.model, self.backend_pair.name if self.backend_pair else "") if p)
        if self.kind == "perf":
            return (f"{where}: {self.metric} {self.tonight:.2f} vs median {self.baseline:.2f} of {self.nights} "
                    f"nights ({self.change_pct:+.1f}%)")
        if self.kind == "agreement":
            return (f"{where}: teacher-forced {self.metric[3:]} rose to {self.tonight:.4f} from a median of "
                    f"{self.baseline:.4f} over {self.nights} nights (B drifts away from the CPU reference)")
        if self.kind == "localize":
            return (f"{where}: the first op departing from the CPU reference is now {self.metric}"
                    + (f" at {self.tonight:.1f} dB SQNR" if self.tonight is not None else "")
                    + f" (not in the last {self.nights} nights)")
        if self.kind == "op-cycles":
            return (f"{where}: op {self.metric} slower: {self.tonight:,.0f} vs {self.baseline:,.0f} cycles on the "
                    f"last good night ({self.change_pct:+.0f}%)")
        if self.kind == "export-verdict":
            return (f"{where}: the export's verdict went {self.metric} (worse than in each of the last "
                    f"{self.nights} nights)")
        return f"{where}: new failure class {self.metric!r} (not seen in the last {self.nights} nights)"


@dataclass(frozen=True)
class ResultRow:
    night_id: str
    started_at: float
    device: str
    soc: str
    arch: str
    model: str
    backend_pair: BackendPair | None
    status: Status
    tests: int
    passed: int
    failed: int
    skipped: int
    flaky: int
    failure_classes: tuple[str, ...]
    prefill_tps: float | None
    decode_tps: float | None
    load_s: float | None
    evidence: dict[str, Cell] = field(default_factory=dict)  # the families' columns by name

    @property
    def key(self) -> tuple[str, str, BackendPair | None]:
        return (self.device, self.model, self.backend_pair)

    def number(self, column: str) -> float | None:
        value = self.evidence.get(column)
        return float(value) if isinstance(value, int | float) else None

    def text(self, column: str) -> str | None:
        value = self.evidence.get(column)
        return value if isinstance(value, str) else None


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _fold(fold: Fold, values: list[Cell]) -> Cell:
    given = [v for v in values if v is not None]
    numbers = [float(v) for v in given if isinstance(v, int | float)]
    if fold is Fold.MEDIAN:
        return statistics.median(numbers) if numbers else None
    if fold is Fold.MAX:
        return max(numbers, default=None)
    if fold is Fold.DISTINCT:
        return ",".join(sorted({str(v) for v in given if v != ""})) or None
    return given[0] if given else None


def evidence_columns(recs: list[TestRecord]) -> dict[str, Cell]:
    """Every family's history columns over a group's records, each folded its own way."""
    values: dict[str, list[Cell]] = {col.name: [] for col in COLUMNS}
    for r in recs:
        for ev in r.evidence:
            for name, value in ev.columns().items():
                values[name].append(value)
    return {col.name: _fold(col.fold, values[col.name]) for col in COLUMNS}


def aggregate(records: Iterable[TestRecord]) -> list[dict[str, Cell]]:
    """One row per (device, model, backend pair) from a night's records; the typed fields as
    the text the database holds."""
    groups: dict[tuple[str, str, str], list[TestRecord]] = {}
    for r in records:
        groups.setdefault((r.device, r.model, r.backend_pair.name if r.backend_pair else ""), []).append(r)
    rows = []
    for (device, model, pair), recs in groups.items():
        bad = [r for r in recs if r.is_bad]
        passed = sum(1 for r in recs if r.status is Status.PASSED)
        status = Status.FAILED if bad else (Status.PASSED if passed else Status.SKIPPED)
        rows.append({
            "device": device, "soc": recs[0].soc_model, "arch": recs[0].htp_arch, "model": model,
            "backend_pair": pair, "status": status.value,
            "tests": len(recs), "passed": passed, "failed": len(bad),
            "skipped": sum(1 for r in recs if r.status is Status.SKIPPED), "flaky": sum(1 for r in recs if r.flaky),
            "failure_classes": json.dumps(sorted({r.cause for r in bad})),
            "prefill_tps": _median(r.prefill_tps for r in recs), "decode_tps": _median(r.decode_tps for r in recs),
            "load_s": _median(r.load_s for r in recs),
            **evidence_columns(recs),
        })
    return rows


_FIXED = 17  # results' own columns in ResultRow's order (night_id .. load_s)


class HistoryError(HarnessError):
    """The history database cannot be opened, read or written (the message names the file)."""


class HistoryBusy(HistoryError):
    """Another process held the history's lock past the wait: busy, not damaged (exit 1)."""


BUSY_WAIT_S = 30.0  # SQLite's own busy wait: a night writing its results holds the lock for seconds


def is_busy(exc: BaseException) -> bool:
    """SQLite's SQLITE_BUSY / SQLITE_LOCKED (any extended code): another connection holds a lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "database is locked" in str(exc)


def _busy(path: Path, wait_s: float) -> HistoryBusy:
    return HistoryBusy(f"{path}: busy: another process (a night or a report) held the history's lock for "
                       f"{wait_s:g} s; run again when it has finished (the history itself is not damaged)")


def is_disk_full(exc: BaseException) -> bool:
    """SQLite's SQLITE_FULL ("database or disk is full") or the OS's ENOSPC / EDQUOT: the disk,
    not the database, is what is wrong."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    code = getattr(exc, "sqlite_errorcode", None)
    return code == sqlite3.SQLITE_FULL or (code is None and "database or disk is full" in str(exc))


def disk_full_message(path: Path, exc: BaseException) -> str:
    return (f"{path}: the history's disk is full ({exc}); free some space there (or point history.db at "
            "another disk) and run again; the database itself is not damaged")


def _fix(path: Path) -> str:
    return (f"move it aside (`mv {path} {path}.broken`) to start a new history, restore it from a backup, "
            "or point history.db elsewhere")


class History:
    """The history database. `History(path)` creates the file and tables when absent."""

    def __init__(self, path: Path | str, *, busy_wait_s: float = BUSY_WAIT_S):
        self.path = Path(path)
        self.busy_wait_s = busy_wait_s
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(f"{self.path}: cannot create the history's folder ({exc.strerror}); "
                               "point history.db at a writable folder") from None
        try:
            self.db = sqlite3.connect(str(self.path), timeout=busy_wait_s)
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.executescript(SCHEMA)
            op_history.create(self.db)
            # A history written before a column existed gets it (NULL for the old nights).
            have = {row[1] for row in self.db.execute("PRAGMA table_info(results)")}
            for column, kind in ADDED_COLUMNS.items():
                if column not in have:
                    self.db.execute(f"ALTER TABLE results ADD COLUMN {column} {kind}")
            self.db.commit()
        except sqlite3.DatabaseError as exc:
            if is_disk_full(exc):
                raise HistoryError(disk_full_message(self.path, exc)) from None
            if is_busy(exc):
                raise _busy(self.path, busy_wait_s) from None
            raise HistoryError(f"{self.path}: not a usable history database ({exc}); {_fix(self.path)}") from None

    def check(self) -> None:
        """Prove the history whole and writable now, before a night runs rather than after
        it: SQLite's quick_check over every page, and a write lock taken and given back."""
        try:
            problems = [str(row[0]) for row in self.db.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError("; ".join([p for p in problems if not p.startswith("***")][:3]))
            self.db.execute("BEGIN IMMEDIATE")
            self.db.rollback()
        except sqlite3.DatabaseError as exc:
            if is_disk_full(exc):
                raise HistoryError(disk_full_message(self.path, exc)) from None
            if is_busy(exc):
                raise _busy(self.path, self.busy_wait_s) from None
            raise HistoryError(f"{self.path}: the history database is damaged or read-only ({exc}); "
                               f"{_fix(self.path)}") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_night(self, night_id: str, records: Iterable[TestRecord], *, started_at: float | None = None,
                  plan: str = "") -> int:
        """Store a night (replacing an earlier store of the same night). Returns rows written."""
        records = list(records)
        if started_at is None:
            started_at = min((r.started_at for r in records), default=time.time())
        rows = aggregate(records)
        with self.db:
            self.db.execute("DELETE FROM results WHERE night_id = ?", (night_id,))
            self.db.execute("INSERT OR REPLACE INTO nights VALUES (?, ?, ?, ?)",
                            (night_id, started_at, plan, time.time()))
            cols = ["night_id", *rows[0].keys()] if rows else []
            for row in rows:
                self.db.execute(f"INSERT INTO results ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                (night_id, *row.values()))
            op_history.store(self.db, night_id, records)
        return len(rows)

    def nights(self, limit: int | None = None, before: float | None = None) -> list[tuple[str, float]]:
        """(night_id, started_at), newest first."""
        sql = "SELECT night_id, started_at FROM nights"
        args: list[float | int] = []
        if before is not None:
            sql += " WHERE started_at < ?"
            args.append(before)
        sql += " ORDER BY started_at DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [(n, s) for n, s in self.db.execute(sql, args)]

    def results(self, night_ids: Iterable[str] | None = None, device: str | None = None) -> list[ResultRow]:
        sql = ("SELECT r.night_id, n.started_at, device, soc, arch, model, backend_pair, status, tests, passed, "
               "failed, skipped, flaky, failure_classes, prefill_tps, decode_tps, load_s, "
               + ", ".join(ADDED_COLUMNS) + " FROM results r JOIN nights n USING (night_id)")
        where, args = [], []
        if night_ids is not None:
            ids = list(night_ids)
            if not ids:
                return []
            where.append(f"r.night_id IN ({', '.join('?' * len(ids))})")
            args += ids
        if device is not None:
            where.append("device = ?")
            args.append(device)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY n.started_at, device, model, backend_pair"
        out = []
        for row in self.db.execute(sql, args):
            (night, started, device, soc, arch, model, pair, status, tests, passed, failed, skipped, flaky, classes,
             prefill, decode, load) = row[:_FIXED]
            # The text the database holds, typed again (harness/report/records.py).
            out.append(ResultRow(night, started, device, soc, arch, model, BackendPair.try_parse(pair) if pair else None,
                                 Status(status), tests, passed, failed, skipped, flaky, tuple(json.loads(classes)),
                                 prefill, decode, load, dict(zip(ADDED_COLUMNS, row[_FIXED:]))))
        return out

    def started_at(self, night_id: str) -> float:
        row = self.db.execute("SELECT started_at FROM nights WHERE night_id = ?", (night_id,)).fetchone()
        if row is None:
            raise HarnessError(f"{self.path}: no night {night_id!r} in the history")
        return float(row[0])

    def regressions(self, night_id: str, *, nights: int = 7, perf_drop_pct: float = 15.0,
                    min_nights: int = 3, agreement_nights: int = 30) -> list[Regression]:
        """Tonight vs the median of the last `nights` nights before it (speeds, new failure
        classes), and vs the oldest nights of the last `agreement_nights` (teacher-forced
        agreement, so a slow drift is caught)."""
        before = self.started_at(night_id)
        past = [n for n, _ in self.nights(limit=nights, before=before)]
        by_key: dict[tuple[str, str, BackendPair | None], list[ResultRow]] = {}
        for row in self.results(past):
            by_key.setdefault(row.key, []).append(row)
        long_past = [n for n, _ in self.nights(limit=max(agreement_nights, nights), before=before)]
        long_by_key: dict[tuple[str, str, BackendPair | None], list[ResultRow]] = {}
        for row in self.results(long_past):  # oldest first
            long_by_key.setdefault(row.key, []).append(row)
        found: list[Regression] = []
        for row in self.results([night_id]):
            history = by_key.get(row.key, [])
            if not history:
                continue  # a new key has nothing to regress from
            for metric, higher_better in PERF_METRICS.items():
                now = getattr(row, metric)
                values = [getattr(h, metric) for h in history if getattr(h, metric) is not None]
                if now is None or len(values) < min_nights:
                    continue
                base = statistics.median(values)
                if base <= 0:
                    continue
                change = (now - base) / base * 100.0
                if (higher_better and change < -perf_drop_pct) or (not higher_better and change > perf_drop_pct):
                    found.append(Regression("perf", *row.key, metric, now, base, len(values)))
            for metric, (floor, share) in AGREEMENT_METRICS.items():
                now = row.number(metric)
                values = [v for h in long_by_key.get(row.key, []) if (v := h.number(metric)) is not None]
                if now is None or len(values) < min_nights:
                    continue
                base = statistics.median(values[:min_nights])
                if now - base > max(floor, share * abs(base)):
                    found.append(Regression("agreement", *row.key, metric, now, base, len(values)))
            past_verdicts = [word for h in history if (word := h.text("export_verdict"))]
            verdict_now = row.text("export_verdict")
            if verdict_now and past_verdicts:
                worst = max(past_verdicts, key=lambda v: EXPORT_VERDICT_RANK.get(v, 0))
                if EXPORT_VERDICT_RANK.get(verdict_now, 0) > EXPORT_VERDICT_RANK.get(worst, 0):
                    found.append(Regression("export-verdict", *row.key, f"{worst} -> {verdict_now}",
                                            nights=len(past_verdicts)))
            found += _localize_moved(row, history)
            seen = {c for h in history for c in h.failure_classes}
            for cls in row.failure_classes:
                if cls not in seen:
                    found.append(Regression("new-failure", *row.key, cls, nights=len(history)))
        return found + [_op_regression(c) for c in op_history.slower_ops(self.db, night_id)]

    def trend(self, device: str, metric: str = "decode_tps",
              nights: int = 30) -> dict[tuple[str, str], list[tuple[str, float, float]]]:
        """(model, backend pair) -> [(night_id, started_at, value)] oldest first, last `nights` nights."""
        if metric not in PERF_METRICS:
            raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(PERF_METRICS)}")
        ids = [n for n, _ in self.nights(limit=nights)]
        out: dict[tuple[str, str], list[tuple[str, float, float]]] = {}
        for row in self.results(ids, device=device):
            value = getattr(row, metric)
            if value is not None:
                pair = row.backend_pair.name if row.backend_pair else ""
                out.setdefault((row.model, pair), []).append((row.night_id, row.started_at, value))
        return out

    def devices(self) -> list[str]:
        return [d for (d,) in self.db.execute("SELECT DISTINCT device FROM results ORDER BY device")]


def _op_regression(change: op_history.OpChange) -> Regression:
    what = " ".join(p for p in (change.op, f"in {change.module}" if change.module else "") if p)
    return Regression("op-cycles", change.device, change.model, None,
                      f"{change.node}{f' ({what})' if what else ''} of {change.program}", change.tonight,
                      change.baseline, 1)


def _localize_moved(row: ResultRow, history: list[ResultRow]) -> list[Regression]:
    """A first departing op tonight that no past night with a localization had (an op departs where
    none did, or an earlier op departs now)."""
    past = [op for h in history if (op := h.text("localize_first_op"))]
    now = row.text("localize_first_op")
    if not now or now == "none" or not past or now in past:
        return []
    return [Regression("localize", *row.key, f"{now} (was {past[-1]})", row.number("localize_sqnr_db"),
                       nights=len(past))]
