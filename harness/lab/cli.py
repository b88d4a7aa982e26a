"""`harness lab run`: load the plan, pick each suite's job, run the night, print the outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from harness.inventory import Inventory
from harness.lab.plan import PlanError, load_plan
from harness.lab.scheduler import DeviceContext, run_night
from harness.report.records import TestRecord

RUNNERS = ("llm_demo",)


def plan_job(ctx: DeviceContext) -> Iterable[TestRecord]:
    """The job for one plan entry, chosen by the suite's runner."""
    if ctx.entry.suite.runner == "llm_demo":
        from harness.pipeline import llm_matrix_job

        return llm_matrix_job(ctx)
    raise PlanError(f"{ctx.plan.path}: suite {ctx.entry.suite.name!r}: runner {ctx.entry.suite.runner!r} has no lab "
                    f"job yet (lab jobs exist for: {', '.join(RUNNERS)}); run it with pytest suites/")


def run_from_cli(inventory: Inventory, plan_path: Path, out_dir: Path, *, lock_dir: str | None = None) -> int:
    plan = load_plan(plan_path)
    locks = Path(lock_dir) if lock_dir else None
    result = run_night(plan, inventory, out_dir, plan_job, lock_dir=locks)
    print(f"night {result.run_id}: {result.wall_s:.1f}s, records in {result.records_path}")
    for name, outcome in sorted(result.devices.items()):
        extra = f" ({outcome.reason})" if outcome.reason else ""
        print(f"  {name:<16} {outcome.status:<12} {outcome.records} records{extra}")
    for kind, path in sorted(result.reports.items()):
        print(f"  report {kind}: {path}")
    for reg in result.regressions:
        print(f"  regression: {reg}")
    if result.interrupted:
        return 130
    return 0 if all(o.status == "completed" for o in result.devices.values()) else 1
