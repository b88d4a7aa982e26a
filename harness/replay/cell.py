"""One cell of a night, as data (`Cell`), and that one cell run again on one device (`run_cell`).

A cell is what a bundle replays and what a bisection step re-runs: a testcase of a suite on a
model folder with the plan's options (runtime folder, QAIRT SDK, runner environment). It runs
through the night's own door (`run_night` on a plan of one entry, one device, the testcase's check
and pair selected), so its verdict is decided by the code that decided the night's."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.inventory import DeviceSpec, Inventory
from harness.lab.plan import Plan, PlanEntry, parse_plan
from harness.report import TestRecord

SayFn = Callable[[str], None]
_TESTCASE = re.compile(r"^test_(?P<check>[A-Za-z0-9_]+)(\[(?P<id>[^\]]*)\])?$")


@dataclass(frozen=True)
class Cell:
    """A plan entry narrowed to one testcase. `options` are the merged plan, model and suite
    options (runtime_dir, qnn_sdk, env, max_new_tokens, timeout_s) with the device's
    placeholders already filled in."""

    testcase: str  # test_generation[qnn/qnn-cat], test_mrope_positions_chunked
    suite: str
    runner: str
    model: str
    model_path: Path
    kind: str = "mnn"
    backends: tuple[str, ...] = ()
    timeout_s: float = 900.0
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def check(self) -> str:
        """The check that decides the testcase (test_generation[qnn/qnn-cat] -> generation)."""
        m = _TESTCASE.match(self.testcase)
        if m is None:
            raise ValueError(f"{self.testcase!r} is not a testcase name (test_<check>[<id>])")
        return m.group("check")

    @property
    def pair(self) -> str | None:
        """The backend pair in the testcase's id, when it has one (qnn/qnn-cat -> qnn/qnn)."""
        m = _TESTCASE.match(self.testcase)
        ident = (m.group("id") if m else None) or ""
        head = ident.split("-", 1)[0]
        return head if head and all(p in ("qnn", "cpu") for p in head.split("/")) else None

    def with_(self, **changes: Any) -> Cell:
        """This cell with another model folder or other options (a bisection's version)."""
        options = {**self.options, **changes.pop("options", {})}
        return replace(self, options=options, **changes)

    def to_json(self) -> dict[str, object]:
        return {"testcase": self.testcase, "suite": self.suite, "runner": self.runner, "model": self.model,
                "model_path": str(self.model_path), "kind": self.kind, "backends": list(self.backends),
                "timeout_s": self.timeout_s, "options": _plain(self.options)}

    @classmethod
    def of_json(cls, raw: Mapping[str, Any]) -> Cell:
        return cls(testcase=str(raw["testcase"]), suite=str(raw["suite"]), runner=str(raw["runner"]),
                   model=str(raw["model"]), model_path=Path(str(raw["model_path"])), kind=str(raw.get("kind", "mnn")),
                   backends=tuple(str(b) for b in raw.get("backends") or ()),
                   timeout_s=float(raw.get("timeout_s", 900.0)), options=dict(raw.get("options") or {}))


def _plain(options: Mapping[str, object]) -> dict[str, object]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()}


def cell_of(plan: Plan, entry: PlanEntry, device: DeviceSpec, testcase: str) -> Cell:
    """The cell of `testcase` in a plan entry on `device`: its paths as that device's."""
    from harness.lab import device_path

    merged = {**plan.options, **entry.model.options, **entry.suite.options}
    options = {k: (str(device_path(str(v), device)) if k in ("runtime_dir", "qnn_sdk") else v)
               for k, v in merged.items()}
    return Cell(testcase=testcase, suite=entry.suite.name, runner=entry.suite.runner, model=entry.model.name,
                model_path=entry.model.path_for(device), kind=entry.model.kind,
                backends=tuple(str(b) for b in entry.suite.backends), timeout_s=entry.suite.timeout_s,
                options=_plain(options))


def cell_plan(cell: Cell, device: str, folder: Path) -> Plan:
    """A plan of this one cell on `device` (its file named as `folder/cell.yaml` in messages)."""
    suite: dict[str, object] = {"name": cell.suite, "runner": cell.runner, "models": [cell.model],
                             "checks": [cell.check], "timeout_s": cell.timeout_s}
    pair = cell.pair
    if pair is not None:
        suite["backends"] = [pair]
    elif cell.backends:
        suite["backends"] = list(cell.backends)
    data = {"name": f"cell {cell.testcase}", "devices": [device],
            "models": {cell.model: {"path": str(cell.model_path), "kind": cell.kind}},
            "suites": [suite], "options": cell.options, "locks": {"wait_s": 600}}
    return parse_plan(data, folder / "cell.yaml")


@dataclass
class CellRun:
    """What one re-run of a cell gave: its record (None when the night made none) and the night's."""

    record: TestRecord | None
    records: list[TestRecord]
    out_dir: Path
    said: list[str]

    @property
    def why_none(self) -> str:
        return "; ".join(self.said[-3:]) or "the run wrote no record of it"


def run_cell(cell: Cell, inventory: Inventory, device: str, out_dir: Path, *, say: SayFn | None = None,
             stop: threading.Event | None = None) -> CellRun:
    """`cell` run again on `device` through the night's door; the testcase's record picked out."""
    from harness.lab import run_night, suite_job

    said: list[str] = []

    def tell(message: str) -> None:
        said.append(message)
        if say is not None:
            say(message)

    out_dir.mkdir(parents=True, exist_ok=True)
    plan = cell_plan(cell, device, out_dir)
    night = run_night(plan, inventory, out_dir / "night", suite_job, say=tell, stop=stop, reports=False)
    records = night.records()
    found = [r for r in records if r.name == cell.testcase and r.device == device]
    return CellRun(found[-1] if found else None, records, out_dir, said)
