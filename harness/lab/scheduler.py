"""A night in the lab: every plan entry on every matching device, one worker per device at a time.

Workers run in parallel (threads: the work is waiting on devices) from a pool of the plan's
`concurrency.workers` threads (default min(devices, 32), harness/lab/pool.py): a night of up
to that many devices takes about as long as its slowest device; more devices queue for a
worker and are claimed only when one takes them. Per device, a worker:
1. claims the device (`claims.open_claim`; waits naming the holder, skips after `locks.wait_s`);
2. before every entry checks health; an unfit device is quarantined for the night;
3. runs the job for the entry and writes each record as it arrives (RecordWriter);
4. on a transport fault reconnects and retries the interrupted entry once: tests already
   delivered are not repeated (`ctx.done`), the first new record is the interrupted test
   and is marked flaky when it passes. A second fault in the entry, a non-retryable fault,
   or more than `recovery.max_faults` faults quarantine the device. A test's own failure
   is a record and is never retried.
A stop (Ctrl-C, SIGTERM, or the `stop` event) reaches each worker's device link (the worker
hands it the event: harness/transport/stop.py), so no program starts after it, a running one is
killed on the device and a push ends between chunks; workers then kill what is left of the run's
device processes and release their claims; what arrived so far is kept and reported.

This module runs the night (threads, signals, waiting); the per-device worker is in
`worker.py`, what a job sees in `context.py`, the result and reports in `night_reports.py`.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from harness.errors import HarnessError, HostWriteError
from harness.hostfiles import prepare_output_dir
from harness.inventory import DeviceSpec, Inventory
from harness.lab.adb_limits import adb_server_warnings
from harness.lab.claims import claim_dir

# The names callers import from here (the lab job's types, the night's result and reports).
from harness.lab.context import (  # noqa: F401
    DeviceContext,
    DeviceOutcome,
    ExportChecks,
    JobFn,
    SayFn,
    TransportFactory,
)
from harness.lab.night_reports import NightCounts, NightResult, write_meta, write_night_reports  # noqa: F401
from harness.lab.plan import Plan, PlanError
from harness.lab.pool import Pool, pool_size
from harness.lab.process_end import freeze_at_exit
from harness.lab.stopsignals import stop_on_signals
from harness.lab.worker import DeviceWorker, Night
from harness.outcomes import NightOutcome
from harness.report import RecordWriter, TestRecord
from harness.transport import open_transport


def _default_say(message: str) -> None:
    print(f"[lab] {message}", file=sys.stderr, flush=True)


def _wait_for_workers(pool: Pool[DeviceWorker], stop: threading.Event, say: SayFn, grace_s: float,
                      signals: list[int]) -> None:
    """Wait for the pool. On a stop (Ctrl-C here, SIGTERM or `stop` set by the caller) no
    further device is taken; the run's device processes on the devices being worked are killed
    at once, so workers blocked in a device command return, then they get `grace_s` to finish
    (each kills its leftovers and releases its claim on the way out). A second Ctrl-C (or
    SIGTERM) stops waiting. Completion is the pool's own events (pool.py says why)."""
    deadline = None
    killers: list[threading.Thread] = []
    while True:
        try:
            if pool.done() and not any(k.is_alive() for k in killers):
                break
            time.sleep(0.02)  # sleep, not join/wait: an interrupt here leaves no thread state behind
        except KeyboardInterrupt:  # only when run outside the main thread's signal handlers
            signals.append(signal.SIGINT)
            stop.set()
        if deadline is not None and len(signals) >= 2:
            say("second interrupt: not waiting for workers any longer")
            break
        if stop.is_set() and deadline is None:
            say("stopping: ending workers, killing device processes, releasing claims")
            deadline = time.monotonic() + grace_s
            # Only devices a worker took hold a claim and may run processes: at most the pool's size.
            for w in pool.taken():
                if w.outcome.status is not NightOutcome.QUARANTINED and not w.finished.is_set():
                    k = threading.Thread(target=w.sweep_after_stop, daemon=True, name=f"kill-{w.device.name}")
                    k.start()
                    killers.append(k)
        if deadline is not None and time.monotonic() > deadline:
            say(f"workers still busy after {grace_s:.0f} s: leaving them (their claims go with this process)")
            break
    for w in pool.not_taken():  # never claimed, nothing ran: the stop came first
        w.outcome.status, w.outcome.reason = NightOutcome.INTERRUPTED, "not started: the night was stopped first"
    for w in pool.taken():
        if stop.is_set() and w.outcome.status is NightOutcome.COMPLETED:
            w.outcome.status = NightOutcome.INTERRUPTED
    for exc in pool.errors():  # DeviceWorker.run catches its own faults: one escaping is a bug
        raise exc


def _start_pool(night: Night, workers: list[DeviceWorker], *, reports: bool) -> Pool[DeviceWorker]:
    """The night's workers on the plan's pool; a device is claimed only when a worker takes it."""
    pool = Pool(workers, DeviceWorker.run, size=pool_size(night.plan.concurrency.workers, len(workers)),
                stop=night.stop, name="lab")
    if workers:
        devices = [w.device for w in workers]
        night.say(f"night {night.run_id}: {len(night.entries)} entries on {len(devices)} devices "
                  f"({_names(devices)}), {pool.size} at a time")
    pool.start()
    if reports and workers:
        threading.Thread(target=_load_report_modules, daemon=True, name="lab-report-import").start()
    return pool


def _load_report_modules() -> None:
    """Import the HTML report's modules (Jinja2, the page's sections) while devices work, which a
    Ctrl-C's reports would otherwise wait for, and compile the page's template (0.5-1.2 s);
    matplotlib only comes when a plot is drawn."""
    from harness.report import page_template

    page_template()


def _names(devices: list[DeviceSpec], shown: int = 12) -> str:
    names = ", ".join(d.name for d in devices[:shown])
    return names + (f" and {len(devices) - shown} more" if len(devices) > shown else "")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


HISTORY_FILE = "history.sqlite"  # in --out, as `harness lab run --help` says

# What a front door runs after a night's reports (the repro bundles and the plan's bisection,
# harness/bisect/night.py): (the night, its plan as run, its devices, the history, the stop) -> problems.
AfterNight = Callable[[NightResult, Plan, list[DeviceSpec], Path, threading.Event], list[str]]


def run_night(
    plan: Plan,
    inventory: Inventory,
    out_dir: Path,
    job: JobFn,
    *,
    lock_dir: Path | None = None,
    history_db: Path | None = None,
    transport_factory: TransportFactory = open_transport,
    stop: threading.Event | None = None,
    say: SayFn | None = None,
    run_id: str | None = None,
    reports: bool = True,
    grace_s: float = 30.0,
    rebuild_exports: bool = False,
    after: AfterNight | None = None,
) -> NightResult:
    """Run the plan on every matching device in parallel; write records and reports.

    out_dir gets records.jsonl (as results arrive), night.json, devices/<name>/ (job
    artifacts), and with `reports`: junit.xml, junit/<device>.xml, report.html, plots/.
    Claim folder: `claims.claim_dir` (`lock_dir`, $HARNESS_LOCK_DIR, the plan's `locks.dir`,
    locks/ next to devices.yaml).
    History: `history_db`, else the plan's `history.db`, else <out_dir>/history.sqlite (default_history).
    Ctrl-C / SIGTERM (handled while this runs in the main thread) or `stop.set()` end the night
    cleanly: device processes killed, claims released, what arrived reported; the result says so.
    A plan's `exports:` run first, on this host, before any claim (harness/lab/exports/stage.py);
    `rebuild_exports` builds them even when the export cache has them.
    """
    devices = plan.select_devices(inventory)
    plan.check_models(devices)
    # Faults on the host's side are found here, before any device is claimed.
    out_dir = prepare_output_dir(out_dir, "output folder (--out)")
    say = say or _default_say
    history_path = Path(history_db or plan.history.db or default_history(out_dir, say))
    if reports:
        check_history(history_path, plan, history_db)
    stop = stop or threading.Event()
    freeze_at_exit()  # the process's exit after a stop is part of the stop's 2 s (process_end.py)
    for warning in adb_server_warnings(devices, pool_size(plan.concurrency.workers, len(devices))):
        say(warning)  # a full adb server takes connections and never answers (docs/lab-scale.md)
    run_id = run_id or new_run_id()
    lock_dir = claim_dir(inventory, plan.locks.dir, lock_dir)
    records_path = out_dir / "records.jsonl"
    result = NightResult(run_id=run_id, plan_name=plan.name, out_dir=out_dir, records_path=records_path,
                         started_at=time.time())
    write_meta(out_dir, result, plan, devices)
    started = time.monotonic()
    signals: list[int] = []
    with stop_on_signals(stop, signals):
        with RecordWriter(records_path) as writer:
            if plan.exports is not None and not stop.is_set():
                plan, job = _export_stage(plan, devices, out_dir, job, stop=stop, say=say, run_id=run_id,
                                          write=writer.write, rebuild=rebuild_exports)
            night = Night(plan=plan, run_id=run_id, out_dir=out_dir, job=job, writer=writer, stop=stop,
                           factory=transport_factory, lock_dir=lock_dir, say=say, entries=plan.entries())
            if isinstance(job, ExportChecks) and not stop.is_set():
                _decide_export_checks(night, job, devices)
            # A stop during the exports: no device is claimed at all.
            workers = [DeviceWorker(night, d) for d in devices] if not stop.is_set() else []
            pool = _start_pool(night, workers, reports=reports)
            _wait_for_workers(pool, stop, say, grace_s, signals)
            result.interrupted = stop.is_set()
            result.devices = {w.device.name: w.outcome for w in workers}
        result.wall_s = time.monotonic() - started
        records = result.records()  # once, for the reports and the counts (0.35 s a read at 1 000 devices)
        if reports:
            _reports(result, records, plan, history_path, claimed=bool(workers), stop=stop, say=say, after=after,
                     devices=devices)
        result.report_problems += [f"{name}: results not kept, the rest of its tests not run: {o.reason}"
                                   for name, o in result.devices.items() if o.status is NightOutcome.HOST_FAULT]
        result.counts = NightCounts.of(records, result.devices, len(result.regressions))
        result.interrupted = stop.is_set()  # a signal during the reports still ends the run as interrupted
    try:
        write_meta(out_dir, result, plan, devices)
    except HostWriteError as exc:  # the start's night.json stays; what arrived is in records.jsonl
        result.report_problems.append(f"night.json not updated: {exc}")
    return result


def _decide_export_checks(night: Night, job: ExportChecks, devices: list[DeviceSpec]) -> None:
    """Checks that need no device: decided once per export, before any device is claimed; each
    worker writes its device's copies as it starts an entry (lab/export_checks.py)."""
    night.export_checks = job.export_checks(night.plan, devices, night.run_id)
    for rec in night.export_checks.failing():
        night.say(f"export check {rec.name} of {rec.model}: {rec.status}, decided once for all its devices: "
                  f"{rec.message.splitlines()[0] if rec.message else ''}")


def default_history(out_dir: Path, say: SayFn) -> Path:
    """<out_dir>/history.sqlite; the first time, an older harness's <out_dir>/../history.sqlite is
    copied in (a temp name, then renamed; the old file is left as it was), so trends go on."""
    path, old = out_dir / HISTORY_FILE, out_dir.parent / HISTORY_FILE
    if not path.exists() and old.is_file():
        tmp = path.with_name(f".{HISTORY_FILE}.tmp")
        try:
            shutil.copy2(old, tmp)
            os.replace(tmp, path)
        except OSError as exc:
            raise HarnessError(f"{old}: cannot copy the history into {path} ({exc.strerror}); copy it by hand "
                               "or point the plan's history.db at it") from None
        say(f"history: {old} (where an older harness kept it, beside --out) copied to {path}, where it is kept "
            "from now on; the old file is no longer written")
    return path


def _reports(result: NightResult, records: list[TestRecord], plan: Plan, history_path: Path, *, claimed: bool,
             stop: threading.Event,
             say: SayFn, after: AfterNight | None = None, devices: list[DeviceSpec] | None = None) -> None:
    """The night's reports into `result` (paths, regressions, problems); then `after` (the front
    door's after-report work: repro bundles, the plan's bisection) unless the night was stopped."""
    if not claimed and stop.is_set():
        # Stopped during the exports, before any claim: their JUnit only (the HTML's plotting
        # alone takes seconds), so Ctrl-C ends the night within 2 s (docs/exports.md).
        result.reports, result.report_problems = _junit_only(records, result.out_dir)
        say("stopped during the exports: JUnit written; no HTML page, nothing added to the history")
        return
    result.reports, result.regressions, result.report_problems = write_night_reports(
        records, result.out_dir, run_id=result.run_id, plan_name=plan.name, started_at=result.started_at,
        history_db=history_path,
        nights=plan.history.nights, perf_drop_pct=plan.history.perf_drop_pct,
        min_nights=plan.history.min_nights, record_history=not result.interrupted,
    )
    if after is not None and not stop.is_set():
        result.report_problems += after(result, plan, list(devices or ()), history_path, stop)


def _export_stage(plan: Plan, devices: list[DeviceSpec], out_dir: Path, job: JobFn, *, stop: threading.Event, say: SayFn,
                  run_id: str, write: Callable[[TestRecord], None], rebuild: bool) -> tuple[Plan, JobFn]:
    """The plan's exports, built (or taken from the cache); the plan's exported models then point
    at this night's exports, and the job skips what needs a failed one (lab/exports/gate.py)."""
    from harness.lab.exports import ExportGate, run_export_stage

    assert plan.exports is not None
    stage = run_export_stage(plan.exports, devices, out_dir, stop=stop, say=say, run_id=run_id, write=write,
                             rebuild=rebuild)
    return stage.plan_for(plan), ExportGate(job, stage)


def _junit_only(records: list[TestRecord], out_dir: Path) -> tuple[dict[str, Path], list[str]]:
    from harness.report import write_junit

    try:
        return write_junit(records, out_dir), []
    except (HostWriteError, OSError) as exc:
        return {}, [f"JUnit not written: {exc}"]


def check_history(path: Path, plan: Plan, history_db: Path | None = None) -> None:
    """The history database opens, is whole and takes writes: a usage error (exit 4) naming
    the file before the night runs, not a lost report after it; busy (another process's lock
    past the wait) is HistoryBusy, exit 1, and the history is left as it was."""
    from harness.lab.exitcodes import UsageError
    from harness.report import History, HistoryBusy, HistoryError

    try:
        with History(path) as hist:
            hist.check()
    except HistoryBusy:
        raise  # another process's lock: the command's work could not be done now (exit 1), not a usage error
    except HistoryError as exc:
        if history_db is None and plan.history.db:
            raise PlanError(f"{plan.path}: key 'history.db': {exc}") from None
        raise UsageError(f"history (default: beside the output folder): {exc}") from None
