"""The bisection itself, over an ordered list of versions, as `git bisect` does it.

Versions are in order (oldest first). Two of them are known: the `old` point (its state is the
old one: for a regression, it passed) and the `new` point (the new state: it fails). The search
halves the versions between them until two neighbours differ: the first version in the new
state is named, with its neighbour's evidence. A version whose step can say neither (its export
failed, its run errored or failed for another reason) is `skip`ped, and the search tries the
untested version nearest the middle instead, as `git bisect skip` does; when only skipped
versions are left between the last old and the first new, the answer is that range.

When the new point's state is "passes" and the old one's "fails" (a fix), the same search names
the version that fixed it (git bisect's old/new terms)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from harness.outcomes import Status


class Mark(StrEnum):
    OLD = "old"  # the old point's state (for a regression: good)
    NEW = "new"  # the new point's state (for a regression: bad)
    SKIP = "skip"  # neither: the step failed for another reason


@dataclass(frozen=True)
class Step:
    """One tested version: its mark and what was seen."""

    index: int
    version: str
    mark: Mark
    status: Status | None = None  # the testcase's status; None when it never ran
    failure_class: str = ""
    message: str = ""
    why: str = ""  # why this mark (a skip's reason)
    cost_s: float = 0.0
    export_cache: str = ""  # hit, miss, ... (the export axis), "" elsewhere
    evidence: dict[str, object] = field(default_factory=dict, hash=False, compare=False)

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "version": self.version, "mark": self.mark.value, "status": self.status.value if self.status else "",
                "failure_class": self.failure_class, "message": self.message, "why": self.why,
                "cost_s": round(self.cost_s, 3), "export_cache": self.export_cache, "evidence": self.evidence}


@dataclass
class Search:
    """The state of one bisection: what is known of each version's mark."""

    versions: Sequence[str]
    old: int
    new: int
    steps: list[Step] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 <= self.old < self.new < len(self.versions):
            raise ValueError(f"the old point ({self.old}) must come before the new point ({self.new}) "
                             f"among {len(self.versions)} versions")

    def marks(self) -> dict[int, Mark]:
        known = {self.old: Mark.OLD, self.new: Mark.NEW}
        known.update({s.index: s.mark for s in self.steps})
        return known

    def bounds(self) -> tuple[int, int]:
        """The last version known old and the first known new after it."""
        marks = self.marks()
        new = min(i for i, m in marks.items() if m is Mark.NEW)
        old = max(i for i, m in marks.items() if m is Mark.OLD and i < new)
        return old, new

    def next_index(self) -> int | None:
        """The untested version nearest the middle of the open range; None when none is left."""
        old, new = self.bounds()
        marks = self.marks()
        candidates = [i for i in range(old + 1, new) if i not in marks]
        if not candidates:
            return None
        middle = (old + new) / 2
        return min(candidates, key=lambda i: (abs(i - middle), i))

    def record(self, step: Step) -> None:
        self.steps.append(step)

    def first_new(self) -> tuple[int | None, list[int]]:
        """(the first version in the new state, when decided; the skipped versions that stand
        between the last old and the first new otherwise)."""
        old, new = self.bounds()
        marks = self.marks()
        between = [i for i in range(old + 1, new) if marks.get(i) is Mark.SKIP]
        if all(i in marks for i in range(old + 1, new)) and not between:
            return new, []
        return (None, between) if all(i in marks for i in range(old + 1, new)) else (None, [])


def max_steps(n_versions: int) -> int:
    """Steps a bisection over `n_versions` (both points included) takes at most without skips."""
    return math.ceil(math.log2(max(2, n_versions - 1)))


def run_search(search: Search, probe: Callable[[int], Step], *, budget: Callable[[], bool] = lambda: True) -> Search:
    """Probe versions until the first new one is decided, only skips are left, or `budget()` says
    stop (a night's time budget)."""
    while budget():
        index = search.next_index()
        if index is None:
            break
        search.record(probe(index))
    return search
