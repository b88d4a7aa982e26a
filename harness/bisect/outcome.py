"""A step's outcome as the bisection compares it: passed, or failed with a class. Two failures
are the same state when their classes are (their messages carry the version's own numbers)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.bisect.search import Mark
from harness.report import TestRecord


@dataclass(frozen=True)
class Outcome:
    passed: bool
    failure_class: str | None = None
    status: str = ""  # the record's status when seen (passed, failed, error, skipped)

    @classmethod
    def of(cls, rec: TestRecord | None) -> Outcome:
        if rec is None:
            return cls(False, None, "")
        cls_ = rec.failure_class.value if rec.failure_class is not None else None
        return cls(rec.status.value == "passed", cls_, rec.status.value)

    def same_state(self, other: Outcome) -> bool:
        if self.passed or other.passed:
            return self.passed == other.passed
        if self.status in ("skipped", "") or other.status == "skipped":
            return False
        return other.failure_class is None or self.failure_class == other.failure_class

    def describe(self) -> str:
        if self.passed:
            return "passed"
        if not self.status:
            return "did not run"
        return f"{self.status}" + (f" ({self.failure_class})" if self.failure_class else "")


def mark_of(seen: Outcome, old: Outcome, new: Outcome) -> Mark:
    """OLD or NEW when the step's outcome is that point's state; SKIP when it is neither (it
    failed for another reason, errored, was skipped or never ran)."""
    if seen.same_state(new):
        return Mark.NEW
    if seen.same_state(old):
        return Mark.OLD
    return Mark.SKIP
