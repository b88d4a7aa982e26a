"""What a lab job sees: the `DeviceContext` of one plan entry on one device, the job's
signature, and a device's night outcome (`DeviceOutcome`; its words are
harness.outcomes.NightOutcome). The scheduler (`scheduler.py`), its
per-device worker (`worker.py`) and the night's reports (`night_reports.py`) share these."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from harness.inventory import DeviceSpec
from harness.lab.plan import Plan, PlanEntry
from harness.outcomes import NightOutcome
from harness.report import TestRecord
from harness.transport import Transport

if TYPE_CHECKING:  # the suites' registry (numpy) is imported only by the nights that decide checks
    from harness.lab.export_checks import ExportCheckSet

TransportFactory = Callable[[DeviceSpec], Transport]
SayFn = Callable[[str], None]


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
    # Records already made for this entry on this device: the export checks' (before the claim)
    # and earlier attempts'; the suite's summary checks (the export's verdict) read them.
    prior: tuple[TestRecord, ...] = ()

    def already_done(self, test_name: str) -> bool:
        return test_name in self.done

    @property
    def stopping(self) -> bool:
        return self.stop.is_set()


JobFn = Callable[[DeviceContext], Iterable[TestRecord]]


@runtime_checkable
class ExportChecks(Protocol):
    """A job that also has checks needing no device: the night asks it to decide them once,
    before any device is claimed; each worker writes its device's copies as it starts an entry
    (harness/lab/jobs.py SuiteJob, harness/lab/export_checks.py)."""

    def export_checks(self, plan: Plan, devices: Sequence[DeviceSpec], run_id: str) -> ExportCheckSet: ...


@dataclass
class DeviceOutcome:
    device: str
    status: NightOutcome = NightOutcome.COMPLETED
    reason: str = ""
    records: int = 0
    faults: int = 0
    wall_s: float = 0.0
