"""The nightly lab: plans, claims, the scheduler, workers, night reports, status. Sub-packages
(plan/, exports/, labgrid/) have faces of their own; this face holds the loose modules' names.
This `__init__` is the package's one face; names load on first use (PEP 562), so importing one
name imports only its module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "claims": ("claim_dir", "open_claim"),
    "cli": ("plan_job", "run_from_cli"),
    "context": ("DeviceContext",),
    "exitcodes": ("ExitCode", "UsageError", "for_error", "for_night"),
    "export_checks": ("export_check_records", "device_path"),
    "health": ("HealthPolicy", "check_device", "judge"),
    "jobs": ("suite_job",),
    "locks": ("DeviceBusy", "DeviceLock", "lock_state"),
    "scheduler": ("AfterNight", "run_night", "new_run_id"),
    "status": ("collect_status", "format_status", "lab_status"),
    "worker": ("EntryRun",),
    "night_reports": ("NightResult", "write_night_reports"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.lab.claims import claim_dir as claim_dir
    from harness.lab.claims import open_claim as open_claim
    from harness.lab.cli import plan_job as plan_job
    from harness.lab.cli import run_from_cli as run_from_cli
    from harness.lab.context import DeviceContext as DeviceContext
    from harness.lab.exitcodes import ExitCode as ExitCode
    from harness.lab.exitcodes import UsageError as UsageError
    from harness.lab.exitcodes import for_error as for_error
    from harness.lab.exitcodes import for_night as for_night
    from harness.lab.export_checks import device_path as device_path
    from harness.lab.export_checks import export_check_records as export_check_records
    from harness.lab.health import HealthPolicy as HealthPolicy
    from harness.lab.health import check_device as check_device
    from harness.lab.health import judge as judge
    from harness.lab.jobs import suite_job as suite_job
    from harness.lab.locks import DeviceBusy as DeviceBusy
    from harness.lab.locks import DeviceLock as DeviceLock
    from harness.lab.locks import lock_state as lock_state
    from harness.lab.night_reports import NightResult as NightResult
    from harness.lab.night_reports import write_night_reports as write_night_reports
    from harness.lab.scheduler import AfterNight as AfterNight
    from harness.lab.scheduler import new_run_id as new_run_id
    from harness.lab.scheduler import run_night as run_night
    from harness.lab.status import collect_status as collect_status
    from harness.lab.status import format_status as format_status
    from harness.lab.status import lab_status as lab_status
    from harness.lab.worker import EntryRun as EntryRun
