"""What one testcase decided: a `Verdict` (status, failure class, message, warning), made from
what its check found. A record's status, class, message and warning are written by one call,
`harness.report.records.TestRecord.set_verdict`, from a Verdict and nothing else, so the
pytest door, the night and the reports read one decision.

`is_bad` and `cause` are the one spelling of "did this not pass" and "why" for a record:
the reporters, the night's worker and the export's verdict ask them, never the status text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from harness.outcomes import FailureClass, RecordWarning, Status


@dataclass(frozen=True)
class Verdict:
    status: Status
    failure_class: FailureClass | None = None
    message: str = ""
    warning: RecordWarning | None = None
    # A class another selected check reports in a testcase of its own (pipeline.decide's
    # `checked_elsewhere`): this testcase passes, and says which verdict it left to that one.
    deferred: FailureClass | None = None
    # What pytest warns with when this verdict passes with a warning (a DriftWarning).
    warn_with: Warning | None = field(default=None, compare=False, repr=False)

    @classmethod
    def passed(cls, message: str = "", *, warning: RecordWarning | None = None,
               warn_with: Warning | None = None) -> Verdict:
        return cls(Status.PASSED, message=message, warning=warning, warn_with=warn_with)

    @classmethod
    def failed(cls, failure_class: FailureClass, message: str) -> Verdict:
        return cls(Status.FAILED, failure_class, message)

    @classmethod
    def error(cls, failure_class: FailureClass, message: str) -> Verdict:
        return cls(Status.ERROR, failure_class, message)

    @classmethod
    def skipped(cls, reason: str, failure_class: FailureClass | None = None) -> Verdict:
        return cls(Status.SKIPPED, failure_class, reason)

    @property
    def is_bad(self) -> bool:
        return is_bad(self.status)


def is_bad(status: Status) -> bool:
    """Failed or error: the record did not pass and was not skipped."""
    return status in (Status.FAILED, Status.ERROR)


class HasOutcome(Protocol):
    @property
    def status(self) -> Status: ...

    @property
    def failure_class(self) -> FailureClass | None: ...


def cause(rec: HasOutcome) -> str:
    """Why a record ended as it did, in one word: its class, else its status ("crash", "failed")."""
    return (rec.failure_class or rec.status).value


__all__ = ["HasOutcome", "Verdict", "cause", "is_bad"]
