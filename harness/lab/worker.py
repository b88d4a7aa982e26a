"""One device's night: the worker that claims the device (`claims.open_claim`), checks its
health before every entry, runs the job for each entry and writes its records, and on a
transport fault reconnects, retries the interrupted entry once or quarantines the device
(the rules are in `scheduler`'s docstring). `scheduler.run_night` runs one per device."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import ConnectionDropped, HarnessError, HostWriteError, StopRequested, TransportError
from harness.evidence import Provenance
from harness.inventory import DeviceSpec
from harness.lab.claims import open_claim
from harness.lab.context import DeviceContext, DeviceOutcome, JobFn, SayFn, TransportFactory
from harness.lab.health import HealthVerdict, check_device
from harness.lab.locks import DeviceBusy
from harness.lab.plan import Plan, PlanEntry
from harness.outcomes import FailureClass, NightOutcome, Status
from harness.report import Detail, RecordWriter, TestRecord
from harness.transport import HeldLink, KillsProcesses, Transport
from harness.transport.retry import NO_RETRY
from harness.verdict import Verdict

if TYPE_CHECKING:
    from harness.lab.export_checks import ExportCheckSet

log = logging.getLogger("harness.lab")


@dataclass
class Night:
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
    # The export checks, decided before any claim: a device's copies are written as its worker
    # starts each entry, and the job's summary checks read them.
    export_checks: ExportCheckSet | None = None


class EntryRun:
    """Delivery bookkeeping for one entry across its attempts."""

    def __init__(self, worker: DeviceWorker, entry: PlanEntry):
        self.worker, self.entry = worker, entry
        self.delivered: set[str] = set()
        self.records: list[TestRecord] = []  # what every attempt delivered: a retry's summary checks read them
        self.attempt = 1
        self.interrupted_pending = False  # the next new record is the test a fault interrupted

    def deliver(self, rec: TestRecord) -> None:
        w = self.worker
        # A runner that swallowed a link fault reports it as a record of this class; for the
        # lab that is a device fault (reconnect, retry once, quarantine), never a test failure.
        if rec.is_bad and rec.failure_class is FailureClass.TRANSPORT_ERROR:
            raise ConnectionDropped.relayed(f"{w.device.name}: link lost during {rec.name}: {rec.message}",
                                            rec.link_fault, device=w.device.name) from rec.link_fault
        if rec.name in self.delivered:
            return  # a retry re-ran a test that already has its result
        self.delivered.add(rec.name)
        self.records.append(rec)
        if self.attempt > 1:
            rec.attempts = max(rec.attempts, self.attempt)
            if self.interrupted_pending:
                rec.flaky = rec.status is Status.PASSED
                rec.stamp(retried_after=self.worker.last_fault)
                self.interrupted_pending = False
        if w.night.stop.is_set() and rec.is_bad:
            # A result cut short by our own stop is not the model's fault.
            rec.set_verdict(Verdict.error(FailureClass.INTERRUPTED, f"interrupted by a stop request: {rec.message}"))
        w.write(rec, self.entry)


class DeviceWorker:
    def __init__(self, night: Night, device: DeviceSpec):
        self.night = night
        self.device = device
        self.outcome = DeviceOutcome(device.name)
        # The whole link: the job gets it (DeviceContext); the worker itself only holds it
        # (HeldLink), checks it (health: ReadsFacts) and kills through it (KillsProcesses).
        self.transport: Transport | None = None
        self.last_fault = ""
        self.dir = night.out_dir / "devices" / device.name
        self.finished = threading.Event()  # set when run() has returned (claim released)
        # A stop's sweep of the run's device processes, done once: by the scheduler's killer
        # at the stop or by this worker before it releases its claim, whichever comes first.
        self._sweep_lock = threading.Lock()
        self._swept = False
        self._claimed = False  # the sweep kills every pid file's process on the device: only ours once claimed

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
                rec.stamp(repeat=entry.repeat)
            rec.stamp(plan_entry=entry.id)
        rec.stamp(run_id=self.night.run_id, transport=d.transport.name)
        self.night.writer.write(rec)
        self.outcome.records += 1

    def _lab_record(self, name: str, verdict: Verdict, entry: PlanEntry | None, signature: str = "",
                    log_excerpt: str = "", facts: dict[str, str] | None = None, attempt: int | None = None) -> None:
        rec = TestRecord(name=name, suite=entry.suite.name if entry else "lab", device=self.device.name,
                         signature=signature, log_excerpt=log_excerpt, model=entry.model.name if entry else "")
        if facts is not None:
            rec.keep(Detail.FACTS, facts)
        rec.put(Provenance(self.device.tier))
        rec.stamp(attempt=attempt)
        rec.set_verdict(verdict)
        self.write(rec, entry, from_job=False)  # lab record names already carry the entry id

    def _skip_rest(self, entries: list[PlanEntry], cls: FailureClass, why: str) -> None:
        for e in entries:
            self._decided(e.id)  # needing no device, they stand for a device the night reached
            self._lab_record(e.id, Verdict.skipped(f"not run: {why}", cls), e)

    def _quarantine(self, reason: str, remaining: list[PlanEntry]) -> None:
        self.outcome.status, self.outcome.reason = NightOutcome.QUARANTINED, reason
        self.night.say(f"{self.device.name}: quarantined for the night: {reason}")
        self._skip_rest(remaining, FailureClass.QUARANTINED, f"device quarantined: {reason}")

    # ---- the worker ----------------------------------------------------------------------
    def run(self) -> None:
        started = time.monotonic()
        night = self.night
        claim = open_claim(self.device, lock_dir=night.lock_dir, run_id=night.run_id, purpose="night")
        try:
            try:
                # The claim engine may resolve the address to connect to.
                self.device = claim.acquire(night.plan.locks.wait_s, say=night.say, cancel=night.stop)
                with self._sweep_lock:
                    self._claimed = True
            except DeviceBusy as exc:
                if night.stop.is_set():
                    self.outcome.status, self.outcome.reason = NightOutcome.INTERRUPTED, str(exc)
                    return
                self.outcome.status, self.outcome.reason = NightOutcome.BUSY, str(exc)
                night.say(str(exc))
                self._skip_rest(night.entries, FailureClass.BUSY, str(exc))
                return
            except HarnessError as exc:
                # The claim engine's own fault (a labgrid coordinator down or restarted, a
                # reservation no place can meet): the device could not be had tonight, named
                # with the reason; not a harness bug, and nothing was touched.
                if night.stop.is_set():
                    self.outcome.status, self.outcome.reason = NightOutcome.INTERRUPTED, str(exc)
                    return
                why = f"{self.device.name}: could not be claimed: {exc}"
                self.outcome.status, self.outcome.reason = NightOutcome.BUSY, why
                night.say(why)
                self._skip_rest(night.entries, FailureClass.BUSY, why)
                return
            try:
                self._run_entries()
            finally:
                # Leftover device processes: ours to kill (a lost device is not reachable anyway).
                if self.outcome.status is not NightOutcome.QUARANTINED and night.stop.is_set():
                    self.sweep_after_stop()
                self._close()
                claim.release()
        except HostWriteError as exc:
            # The host's disk, not the device nor a harness bug: no record can be kept, so the
            # device's remaining entries are not run (exit 1, the night names the disk).
            self.outcome.status, self.outcome.reason = NightOutcome.HOST_FAULT, str(exc)
            night.say(f"{self.device.name}: stopped, its results cannot be kept: {exc}")
        except Exception as exc:  # never lose the other devices to one worker's bug
            log.exception("worker for %s failed", self.device.name)
            self.outcome.status = NightOutcome.QUARANTINED
            self.outcome.reason = f"internal error: {type(exc).__name__}: {exc}"
            self._lab_record("lab::worker", Verdict.error(FailureClass.INTERNAL_ERROR, self.outcome.reason), None,
                             log_excerpt=traceback.format_exc()[-4000:])
        finally:
            self.outcome.wall_s = time.monotonic() - started
            self.finished.set()

    def _decided(self, entry_id: str | None = None) -> list[TestRecord]:
        """This device's copies of the device-less checks (of one entry), written now: a device
        the night never reached gets none (lab/export_checks.py)."""
        checks = self.night.export_checks
        records = checks.records_for(self.device, entry_id) if checks is not None else []
        for rec in records:
            self.night.writer.write(rec)
        return records

    def _close(self) -> None:
        if self.transport is not None:
            _release(self.transport)
            self.transport = None

    def _open(self) -> Transport:
        if self.transport is None:
            self.transport = self.night.factory(self.device)
            # The night's stop reaches the link itself: no program starts after it, a running
            # one is killed on the device, a push ends between chunks (transport/stop.py).
            self.transport.stop_on(self.night.stop)
        return self.transport

    def _run_entries(self) -> None:
        night = self.night
        entries = night.entries
        self.dir.mkdir(parents=True, exist_ok=True)
        for i, entry in enumerate(entries):
            if night.stop.is_set():
                self.outcome.status = NightOutcome.INTERRUPTED
                return
            verdict: HealthVerdict | None
            try:
                checked = check_device(self._open(), night.plan.health)
            except HarnessError as exc:  # the link could not even be opened
                verdict, reasons = None, str(exc)
            else:
                verdict, reasons = checked, "; ".join(checked.reasons)
            if verdict is None or not verdict.ok:
                when = "before the first suite" if i == 0 else f"before {entry.id}"
                reason = f"health check {when} failed: {reasons}"
                self._lab_record("lab::health", Verdict.error(FailureClass.QUARANTINED, reason), None,
                                 signature="lab:health",
                                 facts=verdict.facts if verdict else {})
                self._quarantine(reason, entries[i:])
                return
            if not self._run_entry(entry):
                if self.outcome.status is NightOutcome.QUARANTINED:
                    self._skip_rest(entries[i + 1:], FailureClass.QUARANTINED,
                                    f"device quarantined: {self.outcome.reason}")
                return

    def _run_entry(self, entry: PlanEntry) -> bool:
        """Run one entry with at most one retry after a transport fault. False: stop this device."""
        night = self.night
        run = EntryRun(self, entry)
        decided = self._decided(entry.id)
        while True:
            ctx = DeviceContext(
                device=self.device, transport=self._open(), entry=entry.for_device(self.device), plan=night.plan,
                run_id=night.run_id,
                out_dir=self.dir, stop=night.stop, attempt=run.attempt, done=frozenset(run.delivered),
                prior=(*decided, *run.records),
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
                    self.outcome.status = NightOutcome.INTERRUPTED
                    return False
                return True
            except StopRequested:
                self.outcome.status = NightOutcome.INTERRUPTED
                return False
            except TransportError as exc:
                self.outcome.faults += 1
                self.last_fault = f"{type(exc).__name__}: {exc}"
                if night.stop.is_set():
                    self.outcome.status = NightOutcome.INTERRUPTED
                    return False
                night.say(f"{self.device.name}: transport fault in {entry.id} (attempt {run.attempt}): {exc}")
                why = None
                if not exc.retryable:
                    why = f"{type(exc).__name__} during {entry.id}: {exc}"
                elif run.attempt >= 2:
                    why = f"dropped again during the retry of {entry.id}: {exc}"
                elif self.outcome.faults > night.plan.recovery.max_faults:
                    limit = night.plan.recovery.max_faults
                    why = f"{self.outcome.faults} transport faults tonight (limit {limit}): {exc}"
                else:
                    back, detail = self._reconnect()
                    if not back:
                        why = f"did not come back within {night.plan.recovery.reconnect_s:.0f} s after {exc} ({detail})"
                if why is not None:
                    self._lab_record(f"{entry.id}::interrupted",
                                     Verdict.error(FailureClass.QUARANTINED, f"device lost: {why}"), entry,
                                     signature="lab:device-lost",
                                     log_excerpt=self.last_fault, attempt=run.attempt)
                    self.outcome.status, self.outcome.reason = NightOutcome.QUARANTINED, why
                    night.say(f"{self.device.name}: quarantined for the night: {why}")
                    return False
                run.attempt += 1
                run.interrupted_pending = True
            except HostWriteError:
                raise  # the host's disk: nothing more can be recorded (run() ends the device's night)
            except HarnessError as exc:
                # Harness-side trouble (bad export, provisioning...): this entry fails, the device goes on.
                # The exception's type names the fault in the signature; its class is a setup error.
                self._lab_record(f"{entry.id}::setup", Verdict.error(FailureClass.SETUP_ERROR, str(exc)), entry,
                                 signature=f"lab:{type(exc).__name__}")
                return True
            except Exception as exc:
                log.exception("job failed on %s for %s", self.device.name, entry.id)
                self._lab_record(f"{entry.id}::setup",
                                 Verdict.error(FailureClass.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"), entry,
                                 signature="lab:internal-error",
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

    def sweep_after_stop(self) -> None:
        """After the stop: the run's device processes killed once. The scheduler's killer
        (at the stop) and this worker (before it lets its claim go) both call it; the second
        waits for the first and sweeps again only when that one failed. One sweep after the
        stop is enough: no timed command starts once the stop is set, and one starting as it
        was set is killed by its own watch (transport/stop.py) before the job returns. At a
        1 000-device stop the second sweep was a third of the shell commands (docs/lab-scale.md)."""
        with self._sweep_lock:
            # A worker still waiting for its claim: the processes there are the holder's, not ours.
            if self._claimed and not self._swept:
                self._swept = self.kill_processes()

    def kill_processes(self) -> bool:
        """Kill this run's device processes: the in-flight shell commands (their pid files in
        the transport's scratch folder). The run holds the device lock, so every such process
        is ours. True when the sweep went through."""
        try:
            link = self.night.factory(self.device)
        except HarnessError:
            return False
        # One try: the second caller sweeps again if this one failed, and a stop that waited
        # out the full transport policy (4 tries, up to a minute) per unhealthy device held up
        # every report behind it.
        link.retry = NO_RETRY
        try:
            return _kill_leftovers(link)
        finally:
            _release(link)


def _kill_leftovers(link: KillsProcesses) -> bool:
    """True when the sweep went through."""
    try:
        link.kill_stray_processes()
        return True
    except HarnessError as exc:
        log.warning("%s: could not kill device processes: %s", link.device.name, exc)
        return False


def _release(link: HeldLink) -> None:
    try:
        link.close()
    except Exception:  # closing a dead link must not mask the night's result
        log.debug("close failed for %s", link.device.name, exc_info=True)
