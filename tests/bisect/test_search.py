"""The bisection over an ordered list (harness/bisect/search.py): halving, skips as git bisect
skip, a fix named with old/new terms, the step bound."""

from __future__ import annotations

import math

import pytest

from harness.bisect import Mark, Search, Step, max_steps, run_search


def _probe(first_bad: int, skips: frozenset[int] = frozenset(), fix: bool = False):
    seen: list[int] = []

    def probe(i: int) -> Step:
        seen.append(i)
        if i in skips:
            return Step(i, f"v{i}", Mark.SKIP, why="export failed")
        return Step(i, f"v{i}", Mark.NEW if i >= first_bad else Mark.OLD)

    return probe, seen


@pytest.mark.parametrize("n", [2, 3, 5, 13, 16, 17, 100])
def test_every_first_bad_found_within_the_bound(n):
    for first_bad in range(1, n):
        probe, seen = _probe(first_bad)
        s = run_search(Search([f"v{i}" for i in range(n)], 0, n - 1), probe)
        assert s.first_new() == (first_bad, [])
        assert len(seen) <= max_steps(n) <= math.ceil(math.log2(n)), (n, first_bad, seen)
        assert len(set(seen)) == len(seen), "no version probed twice"


def test_a_skip_is_bisected_around():
    probe, seen = _probe(8, skips=frozenset({6, 9}))
    s = run_search(Search([f"v{i}" for i in range(13)], 0, 12), probe)
    assert s.first_new() == (8, []), s.steps
    assert 6 in seen  # tried, skipped, and the search went on to its neighbours


def test_only_skips_left_gives_the_range():
    probe, _ = _probe(8, skips=frozenset({7, 8}))
    s = run_search(Search([f"v{i}" for i in range(13)], 0, 12), probe)
    first, between = s.first_new()
    assert first is None and between == [7, 8]


def test_points_out_of_order_are_refused():
    with pytest.raises(ValueError, match="must come before"):
        Search(["a", "b"], 1, 0)


def test_budget_stops_the_search():
    probe, seen = _probe(8)
    s = run_search(Search([f"v{i}" for i in range(13)], 0, 12), probe, budget=lambda: len(seen) < 1)
    assert len(seen) == 1 and s.first_new() == (None, [])
