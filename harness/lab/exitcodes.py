"""Exit codes of the `harness` command, pytest's convention, decided here and only here.

| code | meaning                                                                           |
|------|-----------------------------------------------------------------------------------|
| 0    | every test passed (skips allowed)                                                 |
| 1    | a test failed or errored, a device was quarantined or stayed busy (claim wait ran |
|      | out), a regression was flagged (`--no-fail-on-regression` opts out), a report     |
|      | could not be written (disk full), or a command's own work failed (push refused,   |
|      | device offline)                                                                   |
| 2    | interrupted (Ctrl-C, SIGTERM)                                                     |
| 3    | internal error (a harness bug: a Python exception, an `internal-error` record)    |
| 4    | usage, plan or inventory error (bad option, bad/missing file, unknown key/device, |
|      | an output folder that cannot be written, a damaged history database)              |
| 5    | nothing ran: no device matched the plan                                           |

Precedence for a night: interrupted > internal error > failures > passed. Usage errors from
argparse also exit 4 (pytest's code), not argparse's own 2, so 2 always means "interrupted".
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

from harness.errors import HarnessError, InventoryError, OutputPathError

if TYPE_CHECKING:
    from harness.lab.night_reports import NightResult


class ExitCode(IntEnum):
    OK = 0
    TESTS_FAILED = 1
    INTERRUPTED = 2
    INTERNAL_ERROR = 3
    USAGE_ERROR = 4
    NO_TESTS_RAN = 5


class UsageError(HarnessError):
    """A command line that cannot be acted on (exit 4)."""


def for_error(exc: BaseException) -> ExitCode:
    """The code for an error that ended a command before or instead of its work."""
    from harness.lab.plan import NoDeviceMatched, PlanError

    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(exc, NoDeviceMatched):
        return ExitCode.NO_TESTS_RAN
    if isinstance(exc, (PlanError, InventoryError, UsageError, OutputPathError)):
        return ExitCode.USAGE_ERROR
    if isinstance(exc, HarnessError):
        return ExitCode.TESTS_FAILED  # the command's work failed (device busy or offline, push refused)
    return ExitCode.INTERNAL_ERROR


def for_night(result: NightResult, *, fail_on_regression: bool = True) -> ExitCode:
    """The code for a night that ran (see the table above)."""
    counts = result.counts
    if result.interrupted:
        return ExitCode.INTERRUPTED
    if counts.internal_errors:
        return ExitCode.INTERNAL_ERROR
    if counts.failed or counts.error or counts.quarantined or counts.busy or result.report_problems:
        return ExitCode.TESTS_FAILED
    if fail_on_regression and counts.regressions:
        return ExitCode.TESTS_FAILED
    return ExitCode.OK
