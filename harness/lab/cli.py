"""`harness lab run`: load the plan, pick each suite's job, run the night, print the outcome."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.inventory import DeviceSpec, Inventory
from harness.lab.context import DeviceContext
from harness.lab.exitcodes import ExitCode, for_night
from harness.lab.plan import RUNNERS, Plan, PlanError, load_plan
from harness.lab.scheduler import AfterNight, run_night
from harness.report import TestRecord

if TYPE_CHECKING:
    from harness.lab.export_checks import ExportCheckSet


class PlanJob:
    """The job for each plan entry, chosen by the suite's runner; the suites' checks that need
    no device are run once per export before any claim (harness/lab/jobs.py SuiteJob)."""

    def __call__(self, ctx: DeviceContext) -> Iterable[TestRecord]:
        if ctx.entry.suite.runner in RUNNERS:
            from harness.lab.jobs import suite_job  # the suite's runner picks llm_demo's or ExecuTorch's job

            return suite_job(ctx)
        raise PlanError(f"{ctx.plan.path}: suite {ctx.entry.suite.name!r}: runner {ctx.entry.suite.runner!r} has no "
                        f"lab job yet (lab jobs exist for: {', '.join(RUNNERS)}); run it with pytest suites/")

    def export_checks(self, plan: Plan, devices: Sequence[DeviceSpec], run_id: str) -> ExportCheckSet:
        from harness.lab.export_checks import decide_export_checks

        return decide_export_checks(plan, devices, run_id=run_id)


plan_job = PlanJob()


def run_from_cli(inventory: Inventory, plan_path: Path, out_dir: Path, *, lock_dir: str | None = None,
                 fail_on_regression: bool = True, rebuild_exports: bool = False,
                 after: AfterNight | None = None) -> ExitCode:
    """Run a night and print it; the last line is the counts. Returns the exit code
    (harness/lab/exitcodes.py). A plan or inventory error raises before anything runs."""
    plan = load_plan(plan_path)
    from harness.lab.night_log import night_log

    with night_log(Path(out_dir)) as log:  # other libraries' lines go to the file, not the console
        result = run_night(plan, inventory, out_dir, plan_job, lock_dir=Path(lock_dir) if lock_dir else None,
                           rebuild_exports=rebuild_exports, after=after)
    print(f"night {result.run_id}: {result.wall_s:.1f}s, records in {result.records_path}"
          + (" [interrupted]" if result.interrupted else ""))
    for name, outcome in sorted(result.devices.items()):
        extra = f" ({outcome.reason})" if outcome.reason else ""
        print(f"  {name:<16} {outcome.status:<12} {outcome.records} records{extra}")
    for kind, path in sorted(result.reports.items()):
        if ":" not in kind:  # per-device JUnit files sit beside the merged one
            print(f"  report {kind}: {path}")
    print(f"  log (other libraries' lines): {log}")
    if plan.exports is not None:
        from harness.lab.exports import failed_export_lines

        for line in failed_export_lines(result.records()):
            print(f"  {line}")
    for reg in result.regressions:
        print(f"  regression: {reg.describe()}")
    for problem in result.report_problems:
        print(f"harness: {problem}", file=sys.stderr, flush=True)
    from harness.report.console import failed_lines

    for line in failed_lines(result.records()):  # the night ends with why, then its counts
        print(line)
    print(result.counts.line(), flush=True)
    return for_night(result, fail_on_regression=fail_on_regression)
