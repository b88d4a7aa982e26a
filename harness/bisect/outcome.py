"""A step's outcome as the bisection compares it: passed, or failed with a class. Two failures
are the same state when their classes are (their messages carry the version's own numbers)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.bisect.search import Mark
from harness.outcomes import Status
from harness.report import TestRecord
from harness.verdict import is_bad


@dataclass(frozen=True)
class Outcome:
    passed: bool
    failure_class: str | None = None
    status: Status | None = None  # the record's status when seen; None: it never ran (or is a given point)

    @classmethod
    def of(cls, rec: TestRecord | None) -> Outcome:
        if rec is None:
            return cls(False, None, None)
        cls_ = rec.failure_class.value if rec.failure_class is not None else None
        return cls(rec.status is Status.PASSED, cls_, rec.status)

    @property
    def is_failure(self) -> bool:
        """Failed or errored (a skipped testcase or one that never ran is neither state)."""
        return self.status is not None and is_bad(self.status)

    def same_state(self, other: Outcome) -> bool:
        """`self` (a step's) is in `other`'s state (a point's)."""
        if self.passed or other.passed:
            return self.passed == other.passed
        if not self.is_failure:
            return False
        return other.failure_class is None or self.failure_class == other.failure_class

    def describe(self) -> str:
        if self.passed:
            return "passed"
        if self.status is None:
            return "did not run"
        return self.status.value + (f" ({self.failure_class})" if self.failure_class else "")


def mark_of(seen: Outcome, old: Outcome, new: Outcome) -> Mark:
    """OLD or NEW when the step's outcome is that point's state; SKIP when it is neither (it
    failed for another reason, errored, was skipped or never ran)."""
    if seen.same_state(new):
        return Mark.NEW
    if seen.same_state(old):
        return Mark.OLD
    return Mark.SKIP
