"""`harness export --plan PLAN [--target SOC] [--format F]`: only the night's export stage, for a
workstation: the same commands, cache, testcases and failure classes as `harness lab run`, with
records.jsonl and JUnit in `--out`. Exit code: 0 every export built, 1 one failed, 2 interrupted,
4 a plan error (harness/lab/exitcodes.py)."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from harness.hostfiles import prepare_output_dir
from harness.inventory import DeviceSpec, Inventory
from harness.lab.exitcodes import ExitCode, UsageError
from harness.lab.exports.results import EXPORT_SUITE
from harness.lab.plan import load_plan
from harness.lab.stopsignals import stop_on_signals
from harness.outcomes import Status
from harness.report import RecordWriter, TestRecord


def failed_export_lines(records: Iterable[TestRecord]) -> list[str]:
    """Why a night failed at its exports, one line per failed export (the console's summary)."""
    return [f"export failed: {r.name} {r.model} [{r.failure_class}] {r.message}" for r in records
            if r.suite == EXPORT_SUITE and r.status is Status.FAILED]


def _say(message: str) -> None:
    print(f"[export] {message}", file=sys.stderr, flush=True)


def export_from_cli(plan_path: Path, out_dir: Path, *, inventory: Inventory | None, target: str | None = None,
                    fmt: str | None = None, rebuild: bool = False) -> ExitCode:
    from harness.lab.exports.stage import run_export_stage
    from harness.report import write_junit

    plan = load_plan(plan_path)
    if plan.exports is None:
        raise UsageError(f"{plan.path}: the plan has no `exports:`; nothing to export (docs/exports.md)")
    devices: list[DeviceSpec] = []
    if any(b.lab_targets for b in plan.exports.builds):
        if inventory is None:
            raise UsageError("harness export: a build has `targets: lab`, which needs the inventory "
                             "(--file devices.yaml)")
        devices = plan.select_devices(inventory)
    known = {j.target.soc for j in plan.exports.jobs(tuple(d.soc_model for d in devices if d.has_htp))}
    if target and not plan.exports.jobs(tuple(known), only_target=target):
        raise UsageError(f"harness export --target {target}: not a target of the plan (targets: {', '.join(sorted(known))})")
    formats = {f for b in plan.exports.builds for f in b.formats}
    if fmt and fmt not in formats:
        raise UsageError(f"harness export --format {fmt}: not a format of the plan (formats: {', '.join(sorted(formats))})")
    out_dir = prepare_output_dir(out_dir, "output folder (--out)")
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-export-" + uuid.uuid4().hex[:6]
    stop = threading.Event()
    with stop_on_signals(stop), RecordWriter(out_dir / "records.jsonl") as writer:
        stage = run_export_stage(plan.exports, devices, out_dir, stop=stop, say=_say, run_id=run_id,
                                 write=writer.write, rebuild=rebuild, only_target=target, only_format=fmt)
    write_junit(stage.records, out_dir)
    for r in stage.results:
        where = r.folder if r.ok else r.log
        print(f"{r.job.build.model:<16} {r.job.id:<16} {r.status.value:<8} {r.cache.value:<9} {where}")
    for line in failed_export_lines(stage.records):
        print(line)
    failed = sum(r.status is Status.FAILED for r in stage.results)
    stopped = sum(r.status is Status.ERROR for r in stage.results)
    hits = sum(r.ok and not r.cache.built_now for r in stage.results)  # a cache hit built nothing tonight
    print(f"{sum(r.ok for r in stage.results) - hits} built, " + (f"{hits} from the cache, " if hits else "")
          + f"{failed} failed" + (f", {stopped} interrupted" if stopped else "")
          + f" in {stage.wall_s:.1f} s" + (" [interrupted]" if stage.interrupted else ""), flush=True)
    if stage.interrupted:
        return ExitCode.INTERRUPTED
    return ExitCode.TESTS_FAILED if stage.failed() else ExitCode.OK
