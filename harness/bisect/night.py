"""The night's bisection stage (a plan's `bisect:`, harness/lab/plan/bisect_spec.py): after the
reports, each new failure (a device's testcase that passed on its last night and fails tonight)
is bisected between the two nights' versions (points.py), on the plan's reserved device (same
SoC) or the failing one, until the time budget is spent. Each answer is written under
`<out>/bisect/<device>/<testcase>/` (bisect.json, JUnit, HTML) and added to the history."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.bisect.axes import AxisKind
from harness.bisect.points import night_versions, points_from_history, record_night
from harness.errors import HarnessError
from harness.inventory import DeviceSpec, Inventory
from harness.lab import AfterNight
from harness.lab.plan import Plan
from harness.replay import slug
from harness.report import TestRecord

if TYPE_CHECKING:
    from harness.lab import NightResult

SayFn = Callable[[str], None]


def new_failures(records: list[TestRecord], plan: Plan) -> list[TestRecord]:
    """Tonight's failed cells of the plan's entries (the history says which are new)."""
    entries = {e.id for e in plan.entries()}
    return [r for r in records if r.is_bad and r.plan_entry in entries and "::" not in r.name]


def bisect_new_failures(records: list[TestRecord], plan: Plan, inventory: Inventory, out_dir: Path, *,
                        history_db: Path, say: SayFn, stop: threading.Event) -> list[str]:
    """Bisect what is new tonight; returns problems in words (a bisection that could not run)."""
    from harness.bisect.report import answer, write_results
    from harness.bisect.run import BisectRequest, bisect
    from harness.lab import new_run_id

    spec = plan.bisect
    assert spec is not None
    deadline = time.monotonic() + spec.budget_s
    axis = AxisKind(spec.axis)
    problems: list[str] = []
    done = 0
    for rec in new_failures(records, plan):
        left = deadline - time.monotonic()
        if done >= spec.max_failures or left <= 0 or stop.is_set():
            break
        try:
            points = points_from_history(history_db, rec.device, rec.name, axis)
        except HarnessError:
            continue  # not new (it failed last night too), or no versions recorded: nothing to bisect
        device = spec.device or rec.device
        if inventory.get(device).soc_model != rec.soc_model:
            problems.append(f"bisect: {rec.name} failed on {rec.device} ({rec.soc_model}); bisect.device {device} "
                            "is another SoC: not bisected")
            continue
        entry = next(e for e in plan.entries() if e.id == rec.plan_entry)
        folder = out_dir / "bisect" / rec.device / slug(rec.name)
        req = BisectRequest(plan=plan, inventory=inventory, device=device, testcase=rec.name, axis=axis,
                            good=points.good, bad=points.bad, out_dir=folder, model=entry.model.name,
                            versions=tuple(str(v) for v in spec.versions), failure_class=points.failure_class,
                            budget_s=left)
        say(f"bisect: {rec.name} on {rec.device}: {points.describe()}")
        try:
            result = bisect(req, say=say, stop=stop)
            _, said = write_results(result, folder, run_id=new_run_id(), history_db=history_db)
        except HarnessError as exc:
            problems.append(f"bisect: {rec.name} on {rec.device}: {exc}")
            continue
        problems += said
        say(f"bisect: {answer(result)}")
        done += 1
    return problems


def night_hook(inventory: Inventory, *, bundle_files: bool = False, say: SayFn | None = None) -> AfterNight:
    """What `harness lab run` runs after a night's reports: the repro bundles and bisection points
    (harness/replay/night.py), then the plan's bisection of its new failures (`bisect:`)."""
    from harness.replay import after_night

    tell = say or (lambda message: None)

    def after(result: NightResult, plan: Plan, devices: list[DeviceSpec], history_db: Path,
              stop: threading.Event) -> list[str]:
        records = result.records()
        problems = after_night(records, plan, devices, result.out_dir, copy_files=bundle_files)
        try:  # each testcase's outcome and the night's versions: a later bisection's points
            record_night(history_db, result.run_id, result.started_at, records, night_versions(plan, devices))
        except (HarnessError, OSError, sqlite3.Error) as exc:
            problems.append(f"bisection points not recorded in {history_db}: {exc}")
        if plan.bisect is not None and not stop.is_set():
            problems += bisect_new_failures(records, plan, inventory, result.out_dir, history_db=history_db,
                                            say=tell, stop=stop)
        return problems

    return after
