"""A night in the lab: every plan entry on every matching device, one worker per device.

Workers run in parallel (threads: the work is waiting on devices), so a night takes about
as long as its slowest device. Per device, a worker:
1. claims the device (`claims.open_claim`; waits naming the holder, skips after `locks.wait_s`);
2. before every entry checks health; an unfit device is quarantined for the night;
3. runs the job for the entry and writes each record as it arrives (RecordWriter);
4. on a transport fault reconnects and retries the interrupted entry once: tests already
   delivered are not repeated (`ctx.done`), the first new record is the interrupted test
   and is marked flaky when it passes. A second fault in the entry, a non-retryable fault,
   or more than `recovery.max_faults` faults quarantine the device. A test's own failure
   is a record and is never retried.
A stop (Ctrl-C, SIGTERM, or the `stop` event) ends workers between records, kills the device
processes of the run and releases the claims; what arrived so far is kept and reported.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from harness.errors import ConnectionDropped, HarnessError, TransportError
from harness.inventory import DeviceSpec, Inventory
from harness.lab.health import check_device
from harness.lab.claims import DeviceBusy, claim_dir, open_claim
from harness.lab.plan import Plan, PlanEntry
from harness.outcomes import FailureClass
from harness.report.records import RecordWriter, TestRecord, read_records
from harness.transport.base import Transport
from harness.transport.factory import open_transport

log = logging.getLogger("harness.lab")

TransportFactory = Callable[[DeviceSpec], Transport]
SayFn = Callable[[str], None]

# Runners that swallow a link fault report it as a record of this class; for the lab that is
# a device fault (reconnect, retry once, quarantine), never a test failure.
TRANSPORT_FAULT_CLASSES = frozenset({FailureClass.TRANSPORT_ERROR.value})

# Outcome of one device for the night.
COMPLETED, QUARANTINED, BUSY, INTERRUPTED = "completed", "quarantined", "busy", "interrupted"
# Failure class of a result that is a harness bug, not a device's or model's (exit code 3).
INTERNAL_ERROR = FailureClass.INTERNAL_ERROR.value


@dataclass
class DeviceContext:
    """What a job gets for one plan entry on one device.

    The job yields TestRecords; the scheduler stamps device, run and retry facts and writes
    them at once. Transport faults must propagate as TransportError (the scheduler
    reconnects and retries); a test that fails is a record. A stop kills the programs the
    job left running on the device (Transport.kill_stray_processes).
    """

    device: DeviceSpec
    transport: Transport
    entry: PlanEntry
    plan: Plan
    run_id: str
    out_dir: Path  # this device's folder for logs and pulled outputs
    stop: threading.Event
    attempt: int = 1
    done: frozenset[str] = frozenset()  # test names already delivered for this entry (on a retry)

    def already_done(self, test_name: str) -> bool:
        return test_name in self.done

    @property
    def stopping(self) -> bool:
        return self.stop.is_set()


JobFn = Callable[[DeviceContext], Iterable[TestRecord]]


@dataclass
class DeviceOutcome:
    device: str
    status: str = COMPLETED  # completed | quarantined | busy | interrupted
    reason: str = ""
    records: int = 0
    faults: int = 0
    wall_s: float = 0.0


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
    def of(cls, records: list[TestRecord], devices: dict[str, "DeviceOutcome"], regressions: int) -> "NightCounts":
        by = {s: sum(1 for r in records if r.status == s) for s in ("passed", "failed", "error", "skipped")}
        return cls(**by, quarantined=sum(o.status == QUARANTINED for o in devices.values()),
                   flaky=sum(1 for r in records if r.flaky), busy=sum(o.status == BUSY for o in devices.values()),
                   regressions=regressions,
                   internal_errors=sum(1 for r in records if r.failure_class == INTERNAL_ERROR))

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
    regressions: list = field(default_factory=list)  # harness.report.history.Regression
    counts: NightCounts = field(default_factory=NightCounts)

    def records(self) -> list[TestRecord]:
        return read_records(self.records_path)


def _default_say(message: str) -> None:
    print(f"[lab] {message}", file=sys.stderr, flush=True)


@dataclass
class _Night:
    plan: Plan
    run_id: str
    out_dir: Path
    job: JobFn
    writer: RecordWriter
    stop: threading.Event
    factory: TransportFactory
    lock_dir: Path
    say: SayFn
    entries: list[PlanEntry]


class _EntryRun:
    """Delivery bookkeeping for one entry across its attempts."""

    def __init__(self, worker: "_DeviceWorker", entry: PlanEntry):
        self.worker, self.entry = worker, entry
        self.delivered: set[str] = set()
        self.attempt = 1
        self.interrupted_pending = False  # the next new record is the test a fault interrupted

    def deliver(self, rec: TestRecord) -> None:
        w = self.worker
        if rec.status in ("failed", "error") and rec.failure_class in TRANSPORT_FAULT_CLASSES:
            raise ConnectionDropped(f"{w.device.name}: link lost during {rec.name}: {rec.message}")
        if rec.name in self.delivered:
            return  # a retry re-ran a test that already has its result
        self.delivered.add(rec.name)
        if self.attempt > 1:
            rec.attempts = max(rec.attempts, self.attempt)
            if self.interrupted_pending:
                rec.flaky = rec.status == "passed"
                rec.extras["retried_after"] = self.worker.last_fault
                self.interrupted_pending = False
        if w.night.stop.is_set() and rec.status in ("failed", "error"):
            # A result cut short by our own stop is not the model's fault.
            rec.status, rec.failure_class = "error", FailureClass.INTERRUPTED.value
            rec.message = f"interrupted by a stop request: {rec.message}"
        w.write(rec, self.entry)


class _DeviceWorker:
    def __init__(self, night: _Night, device: DeviceSpec):
        self.night = night
        self.device = device
        self.outcome = DeviceOutcome(device.name)
        self.transport: Transport | None = None
        self.last_fault = ""
        self.dir = night.out_dir / "devices" / device.name
        self.finished = threading.Event()  # set when run() has returned (claim released)

    # ---- records -------------------------------------------------------------------------
    def write(self, rec: TestRecord, entry: PlanEntry | None, *, from_job: bool = True) -> None:
        d = self.device
        rec.device = d.name
        rec.soc_model = rec.soc_model or d.soc_model
        rec.htp_arch = rec.htp_arch or d.htp_arch
        if entry is not None:
            rec.suite = rec.suite or entry.suite.name
            rec.model = rec.model or entry.model.name
            if from_job and self.night.plan.repeats > 1:
                rec.name = f"{rec.name}#{entry.repeat}"  # repeats stay distinct test cases
                rec.extras.setdefault("repeat", entry.repeat)
            rec.extras.setdefault("plan_entry", entry.id)
        rec.extras.setdefault("run_id", self.night.run_id)
        rec.extras.setdefault("transport", d.transport)
        self.night.writer.write(rec)
        self.outcome.records += 1

    def _lab_record(self, name: str, status: str, cls: str, message: str, entry: PlanEntry | None,
                    signature: str = "", log_excerpt: str = "", extras: dict | None = None) -> None:
        rec = TestRecord(name=name, suite=entry.suite.name if entry else "lab", device=self.device.name,
                         status=status, failure_class=cls, signature=signature, message=message,
                         log_excerpt=log_excerpt, model=entry.model.name if entry else "",
                         extras=dict(extras or {}))
        self.write(rec, entry, from_job=False)  # lab record names already carry the entry id

    def _skip_rest(self, entries: list[PlanEntry], cls: str, why: str) -> None:
        for e in entries:
            self._lab_record(e.id, "skipped", cls, f"not run: {why}", e)

    def _quarantine(self, reason: str, remaining: list[PlanEntry]) -> None:
        self.outcome.status, self.outcome.reason = QUARANTINED, reason
        self.night.say(f"{self.device.name}: quarantined for the night: {reason}")
        self._skip_rest(remaining, FailureClass.QUARANTINED.value, f"device quarantined: {reason}")

    # ---- the worker ----------------------------------------------------------------------
    def run(self) -> None:
        started = time.monotonic()
        night = self.night
        claim = open_claim(self.device, lock_dir=night.lock_dir, run_id=night.run_id, purpose="night")
        try:
            try:
                # The claim engine may resolve the address to connect to.
                self.device = claim.acquire(night.plan.locks.wait_s, say=night.say, cancel=night.stop)
            except DeviceBusy as exc:
                if night.stop.is_set():
                    self.outcome.status, self.outcome.reason = INTERRUPTED, str(exc)
                    return
                self.outcome.status, self.outcome.reason = BUSY, str(exc)
                night.say(str(exc))
                self._skip_rest(night.entries, FailureClass.BUSY.value, str(exc))
                return
            try:
                self._run_entries()
            finally:
                # Leftover device processes: ours to kill (a lost device is not reachable anyway).
                if self.outcome.status != QUARANTINED and night.stop.is_set():
                    self.kill_processes()
                self._close()
                claim.release()
        except Exception as exc:  # never lose the other devices to one worker's bug
            log.exception("worker for %s failed", self.device.name)
            self.outcome.status = QUARANTINED
            self.outcome.reason = f"internal error: {type(exc).__name__}: {exc}"
            self._lab_record("lab::worker", "error", INTERNAL_ERROR, self.outcome.reason, None,
                             log_excerpt=traceback.format_exc()[-4000:])
        finally:
            self.outcome.wall_s = time.monotonic() - started
            self.finished.set()

    def _close(self) -> None:
        if self.transport is not None:
            try:
                self.transport.close()
            except Exception:  # closing a dead link must not mask the night's result
                log.debug("close failed for %s", self.device.name, exc_info=True)
            self.transport = None

    def _open(self) -> Transport:
        if self.transport is None:
            self.transport = self.night.factory(self.device)
        return self.transport

    def _run_entries(self) -> None:
        night = self.night
        entries = night.entries
        self.dir.mkdir(parents=True, exist_ok=True)
        for i, entry in enumerate(entries):
            if night.stop.is_set():
                self.outcome.status = INTERRUPTED
                return
            try:
                verdict = check_device(self._open(), night.plan.health)
            except HarnessError as exc:  # the link could not even be opened
                verdict = None
                reasons = str(exc)
            else:
                reasons = "; ".join(verdict.reasons)
            if verdict is None or not verdict.ok:
                when = "before the first suite" if i == 0 else f"before {entry.id}"
                reason = f"health check {when} failed: {reasons}"
                self._lab_record("lab::health", "error", FailureClass.QUARANTINED.value, reason, None, signature="lab:health",
                                 extras={"facts": verdict.facts if verdict else {}})
                self._quarantine(reason, entries[i:])
                return
            if not self._run_entry(entry):
                if self.outcome.status == QUARANTINED:
                    self._skip_rest(entries[i + 1:], FailureClass.QUARANTINED.value,
                                    f"device quarantined: {self.outcome.reason}")
                return

    def _run_entry(self, entry: PlanEntry) -> bool:
        """Run one entry with at most one retry after a transport fault. False: stop this device."""
        night = self.night
        run = _EntryRun(self, entry)
        while True:
            ctx = DeviceContext(
                device=self.device, transport=self._open(), entry=entry.for_device(self.device), plan=night.plan, run_id=night.run_id,
                out_dir=self.dir, stop=night.stop, attempt=run.attempt, done=frozenset(run.delivered),
            )
            try:
                records = iter(night.job(ctx))
                try:
                    for rec in records:
                        run.deliver(rec)
                        if night.stop.is_set():
                            break
                finally:
                    close = getattr(records, "close", None)
                    if close is not None:
                        close()  # let an abandoned generator job run its clean-up now
                if night.stop.is_set():
                    self.outcome.status = INTERRUPTED
                    return False
                return True
            except TransportError as exc:
                self.outcome.faults += 1
                self.last_fault = f"{type(exc).__name__}: {exc}"
                if night.stop.is_set():
                    self.outcome.status = INTERRUPTED
                    return False
                night.say(f"{self.device.name}: transport fault in {entry.id} (attempt {run.attempt}): {exc}")
                why = None
                if not exc.retryable:
                    why = f"{type(exc).__name__} during {entry.id}: {exc}"
                elif run.attempt >= 2:
                    why = f"dropped again during the retry of {entry.id}: {exc}"
                elif self.outcome.faults > night.plan.recovery.max_faults:
                    why = f"{self.outcome.faults} transport faults tonight (limit {night.plan.recovery.max_faults}): {exc}"
                else:
                    back, detail = self._reconnect()
                    if not back:
                        why = f"did not come back within {night.plan.recovery.reconnect_s:.0f} s after {exc} ({detail})"
                if why is not None:
                    self._lab_record(f"{entry.id}::interrupted", "error", FailureClass.QUARANTINED.value,
                                     f"device lost: {why}", entry, signature="lab:device-lost",
                                     log_excerpt=self.last_fault, extras={"attempt": run.attempt})
                    self.outcome.status, self.outcome.reason = QUARANTINED, why
                    night.say(f"{self.device.name}: quarantined for the night: {why}")
                    return False
                run.attempt += 1
                run.interrupted_pending = True
            except HarnessError as exc:
                # Harness-side trouble (bad export, provisioning...): this entry fails, the device goes on.
                self._lab_record(f"{entry.id}::setup", "error", type(exc).__name__, str(exc), entry,
                                 signature=f"lab:{type(exc).__name__}")
                return True
            except Exception as exc:
                log.exception("job failed on %s for %s", self.device.name, entry.id)
                self._lab_record(f"{entry.id}::setup", "error", INTERNAL_ERROR,
                                 f"{type(exc).__name__}: {exc}", entry, signature="lab:internal-error",
                                 log_excerpt=traceback.format_exc()[-4000:])
                return True

    def _reconnect(self) -> tuple[bool, str]:
        night = self.night
        self._close()
        deadline = time.monotonic() + night.plan.recovery.reconnect_s
        detail = ""
        while True:
            try:
                verdict = check_device(self._open(), night.plan.health)
                if verdict.ok:
                    night.say(f"{self.device.name}: reconnected; retrying the interrupted test once")
                    return True, ""
                detail = verdict.summary()
            except HarnessError as exc:
                detail = str(exc)
            self._close()
            if time.monotonic() >= deadline or night.stop.wait(1.0):
                return False, detail

    def kill_processes(self) -> None:
        """Kill this run's device processes: in-flight shell commands (their pid files in the
        transport's scratch folder). The run holds the device lock, so every such process is
        ours."""
        try:
            t = self.night.factory(self.device)
        except HarnessError:
            return
        try:
            t.kill_stray_processes()
        except HarnessError as exc:
            log.warning("%s: could not kill device processes: %s", self.device.name, exc)
        finally:
            try:
                t.close()
            except Exception:
                pass


@contextmanager
def _stop_on_signals(stop: threading.Event, signals: list[int]) -> Iterator[None]:
    """While the night runs in the main thread, SIGINT and SIGTERM only set `stop` (and are
    counted): no KeyboardInterrupt lands in the middle of a record write or a claim release."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, _frame: object) -> None:
        signals.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_for_workers(workers: list[_DeviceWorker], stop: threading.Event, say: SayFn, grace_s: float,
                      signals: list[int]) -> None:
    """Wait for the workers. On a stop (Ctrl-C here, SIGTERM or `stop` set by the caller) kill
    the run's device processes at once, so workers blocked in a device command return, then
    give them `grace_s` to finish (each kills its leftovers and releases its claim on the way
    out). A second Ctrl-C (or SIGTERM) stops waiting.

    Completion is each worker's own `finished` event, never `Thread.is_alive()`: on CPython
    3.11 a `join()` interrupted by KeyboardInterrupt marks a still-running thread as stopped."""
    deadline = None
    killers: list[threading.Thread] = []
    while True:
        try:
            if all(w.finished.is_set() for w in workers) and not any(k.is_alive() for k in killers):
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
            for w in workers:
                if w.outcome.status != QUARANTINED and not w.finished.is_set():
                    k = threading.Thread(target=w.kill_processes, daemon=True, name=f"kill-{w.device.name}")
                    k.start()
                    killers.append(k)
        if deadline is not None and time.monotonic() > deadline:
            say(f"workers still busy after {grace_s:.0f} s: leaving them (their claims go with this process)")
            break
    for w in workers:
        if stop.is_set() and w.outcome.status == COMPLETED:
            w.outcome.status = INTERRUPTED


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


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
) -> NightResult:
    """Run the plan on every matching device in parallel; write records and reports.

    out_dir gets records.jsonl (as results arrive), night.json, devices/<name>/ (job
    artifacts), and with `reports`: junit.xml, junit/<device>.xml, report.html, plots/.
    Claim folder: `claims.claim_dir` (`lock_dir`, $HARNESS_LOCK_DIR, the plan's `locks.dir`,
    locks/ next to devices.yaml).
    History: `history_db`, else the plan's `history.db`, else <out_dir>/../history.sqlite.
    Ctrl-C / SIGTERM (handled while this runs in the main thread) or `stop.set()` end the night
    cleanly: device processes killed, claims released, what arrived reported; the result says so.
    """
    devices = plan.select_devices(inventory)
    plan.check_models(devices)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stop = stop or threading.Event()
    say = say or _default_say
    run_id = run_id or new_run_id()
    lock_dir = claim_dir(inventory, plan.locks.dir, lock_dir)
    records_path = out_dir / "records.jsonl"
    result = NightResult(run_id=run_id, plan_name=plan.name, out_dir=out_dir, records_path=records_path,
                         started_at=time.time())
    _write_meta(out_dir, result, plan, devices)
    started = time.monotonic()
    signals: list[int] = []
    with _stop_on_signals(stop, signals):
        with RecordWriter(records_path) as writer:
            night = _Night(plan=plan, run_id=run_id, out_dir=out_dir, job=job, writer=writer, stop=stop,
                           factory=transport_factory, lock_dir=lock_dir, say=say, entries=plan.entries())
            workers = [_DeviceWorker(night, d) for d in devices]
            threads = [threading.Thread(target=w.run, name=f"lab-{w.device.name}", daemon=True) for w in workers]
            say(f"night {run_id}: {len(night.entries)} entries on {len(devices)} devices "
                f"({', '.join(d.name for d in devices)})")
            for t in threads:
                t.start()
            _wait_for_workers(workers, stop, say, grace_s, signals)
            result.interrupted = stop.is_set()
            result.devices = {w.device.name: w.outcome for w in workers}
        result.wall_s = time.monotonic() - started
        if reports:
            result.reports, result.regressions = write_night_reports(
                result.records(), out_dir, run_id=run_id, plan_name=plan.name, started_at=result.started_at,
                history_db=Path(history_db or plan.history.db or out_dir.parent / "history.sqlite"),
                nights=plan.history.nights, perf_drop_pct=plan.history.perf_drop_pct,
                min_nights=plan.history.min_nights, record_history=not result.interrupted,
            )
        result.counts = NightCounts.of(result.records(), result.devices, len(result.regressions))
        result.interrupted = stop.is_set()  # a signal during the reports still ends the run as interrupted
    _write_meta(out_dir, result, plan, devices)
    return result


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
) -> tuple[dict[str, Path], list]:
    """JUnit (per device + merged), SQLite history with the regression check, HTML + plots.
    An interrupted night is reported but not recorded in the history (it would skew baselines)."""
    from harness.report import html, junit
    from harness.report.history import History

    paths: dict[str, Path] = {}
    paths.update(junit.write_junit(records, out_dir))
    with History(history_db) as hist:
        regressions = []
        if record_history:
            hist.add_night(run_id, records, started_at=started_at, plan=plan_name)
            regressions = hist.regressions(run_id, nights=nights, perf_drop_pct=perf_drop_pct, min_nights=min_nights)
        paths["history"] = Path(history_db)
        paths["html"] = html.write_html(records, out_dir, title=f"{plan_name} - {run_id}", history=hist,
                                        regressions=regressions)
    return paths, regressions


def _write_meta(out_dir: Path, result: NightResult, plan: Plan, devices: list[DeviceSpec]) -> None:
    meta = {
        "run_id": result.run_id, "plan": str(plan.path), "plan_name": plan.name, "started_at": result.started_at,
        "wall_s": result.wall_s, "interrupted": result.interrupted, "host_pid": os.getpid(),
        "devices": [d.name for d in devices],
        "outcomes": {k: asdict(v) for k, v in result.devices.items()},
        "reports": {k: str(v) for k, v in result.reports.items()},
        "counts": asdict(result.counts),
    }
    tmp = out_dir / "night.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    os.replace(tmp, out_dir / "night.json")
