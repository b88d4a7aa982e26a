"""Per-op cycles night to night, in the history database (docs/executorch-runner.md#per-op-cycles-night-to-night).

Each night keeps every QNN op's cycles of each profiled run (a record's harness.evidence.OpCyclesRun
views, given today by the per-op cycles family: the plain program run with `--profile_level 2`) in
the `op_cycles` table, one row per (night, device, model, program, node). A night is compared with
the **last good night** of the same device, model and program: the latest earlier night whose run
passed. An op is slower when its cycles rose beyond its noise: above `NOISE` times the highest it
had over the last `BAND_NIGHTS` good nights (repeated nights of one program are repeated runs:
their spread is the op's own noise), once at least `MIN_GOOD_NIGHTS` of them measured it, and by
more than `MIN_RISE_CYCLES` over the last good night (an op too small to matter is never named).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from harness.evidence import OpCyclesRun
from harness.report.records import TestRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS op_cycles (
    night_id TEXT NOT NULL REFERENCES nights(night_id) ON DELETE CASCADE,
    device TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    program TEXT NOT NULL,
    node TEXT NOT NULL,
    op TEXT NOT NULL DEFAULT '',
    module TEXT NOT NULL DEFAULT '',
    cycles REAL NOT NULL,              -- the least of the run's calls
    unit TEXT NOT NULL,                -- "cycles" or "cycles, emulator"
    good INTEGER NOT NULL,             -- the run passed: a baseline for later nights
    PRIMARY KEY (night_id, device, model, program, node)
);
"""

# An op's cycles over repeated runs of one program, each op the least of its 20 calls
# (harness/suite/executorch/op_profile.py): the largest over the smallest run, over the ops of at
# least MIN_RISE_CYCLES, was at most 1.37 (median 1.01) on the host's HTP emulator on a 2-core
# host at load 13-15 (docs/executorch-runner.md#per-op-cycles-night-to-night; repeated nights:
# benchmarks/op_cycles_nights.py). A rise beyond NOISE is not noise.
# A KV program's ops, each the least of its 20 one-token calls, spread more: up to 6.3x between two
# nights at load 24 (benchmarks/op_cycles_nights.py), which each op's band over its good nights covers.
# And with a band of one night, a repeat night of the same program still rose up to 2.9x (load
# 24): NOISE is 3, and an op is judged once MIN_GOOD_NIGHTS good nights measured its band.
NOISE = 3.0
MIN_RISE_CYCLES = 100_000.0
BAND_NIGHTS = 7
MIN_GOOD_NIGHTS = 2

Key = tuple[str, str, str]  # device, model, program


@dataclass(frozen=True)
class OpChange:
    device: str
    model: str
    program: str
    node: str
    op: str
    module: str
    tonight: float
    baseline: float  # on the last good night
    baseline_night: str
    unit: str
    band: float = 0.0  # the highest over the last BAND_NIGHTS good nights

    @property
    def ratio(self) -> float:
        return self.tonight / self.baseline if self.baseline > 0 else float("inf")

    def describe(self) -> str:
        where = "/".join(p for p in (self.device, self.model) if p)
        what = " ".join(p for p in (self.op, f"in {self.module}" if self.module else "") if p)
        return (f"{where}: op {self.node}{f' ({what})' if what else ''} of {self.program} slower: "
                f"{self.tonight:,.0f} vs {self.baseline:,.0f} {self.unit} on the last good night "
                f"{self.baseline_night} (x{self.ratio:.1f}; beyond x{NOISE} of its highest, "
                f"{self.band:,.0f}, over its recent good nights)")


def create(db: sqlite3.Connection) -> None:
    db.executescript(SCHEMA)


def store(db: sqlite3.Connection, night_id: str, records: Iterable[TestRecord]) -> int:
    """The night's per-op cycles (inside the caller's transaction). Returns rows written."""
    db.execute("DELETE FROM op_cycles WHERE night_id = ?", (night_id,))
    rows = 0
    for r in records:
        for found in r.evidence.views(OpCyclesRun):
            for o in found.ops:
                db.execute("INSERT OR REPLACE INTO op_cycles VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           (night_id, r.device, r.model, found.program, o.node, o.op, o.module, o.cycles,
                            found.unit_label, int(not r.is_bad)))
                rows += 1
    return rows


def night_ops(db: sqlite3.Connection, night_id: str, *, good_only: bool = False) -> dict[Key, dict[str, tuple[str, str, float, str]]]:
    """(device, model, program) -> node -> (op, module, cycles, unit) of one night."""
    out: dict[Key, dict[str, tuple[str, str, float, str]]] = {}
    sql = "SELECT device, model, program, node, op, module, cycles, unit FROM op_cycles WHERE night_id = ?"
    for device, model, program, node, op, module, cycles, unit in db.execute(
            sql + (" AND good = 1" if good_only else "") + " ORDER BY rowid", (night_id,)):  # QNN's op order
        out.setdefault((device, model, program), {})[node] = (op, module, float(cycles), unit)
    return out


def good_nights(db: sqlite3.Connection, key: Key, before: float, limit: int = BAND_NIGHTS) -> list[str]:
    """The good nights of `key` before `before`, newest first."""
    rows = db.execute("SELECT DISTINCT o.night_id, n.started_at FROM op_cycles o JOIN nights n USING (night_id) "
                      "WHERE o.device = ? AND o.model = ? AND o.program = ? AND o.good = 1 AND n.started_at < ? "
                      "ORDER BY n.started_at DESC LIMIT ?", (*key, before, limit)).fetchall()
    return [str(r[0]) for r in rows]


def last_good_night(db: sqlite3.Connection, key: Key, before: float) -> str | None:
    found = good_nights(db, key, before, 1)
    return found[0] if found else None


def slower_ops(db: sqlite3.Connection, night_id: str) -> list[OpChange]:
    """The ops of `night_id` slower than on the last good night of their device, model and program,
    slowest rise first."""
    row = db.execute("SELECT started_at FROM nights WHERE night_id = ?", (night_id,)).fetchone()
    if row is None:
        return []
    found: list[OpChange] = []
    for key, ops in night_ops(db, night_id).items():
        nights = good_nights(db, key, float(row[0]))
        if len(nights) < MIN_GOOD_NIGHTS:
            continue  # its noise is not measured yet
        base = night_ops(db, nights[0], good_only=True).get(key, {})
        band: dict[str, float] = {}
        for past in nights:
            for node, (_, _, cycles, unit) in night_ops(db, past, good_only=True).get(key, {}).items():
                if unit == next(iter(ops.values()))[3]:
                    band[node] = max(band.get(node, 0.0), cycles)
        for node, (op, module, cycles, unit) in ops.items():
            was = base.get(node)
            if was is None or was[3] != unit:
                continue  # a new op, or another clock: nothing to compare with
            if cycles > NOISE * band.get(node, was[2]) and cycles - was[2] > MIN_RISE_CYCLES:
                found.append(OpChange(*key, node, op, module, cycles, was[2], nights[0], unit, band.get(node, was[2])))
    return sorted(found, key=lambda c: -(c.tonight - c.baseline))


__all__ = ["BAND_NIGHTS", "MIN_GOOD_NIGHTS", "MIN_RISE_CYCLES", "NOISE", "OpChange", "create", "good_nights",
           "last_good_night", "night_ops", "slower_ops", "store"]
