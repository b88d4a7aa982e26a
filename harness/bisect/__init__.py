"""`harness bisect` (docs/bisect.md): which version broke (or fixed) a testcase, on one of three
axes: the export's inputs (commits of its recipe repository, re-exported through the export
cache), the runtime (ordered runtime folders), QAIRT (ordered SDK roots). search.py the
bisection (git bisect's, skips included), axes.py the versions, recipe.py the export axis,
outcome.py a step's state, run.py the steps, report.py the answer and its records, points.py the
good and bad points from the history, night.py a plan's bisection of its new failures, cli.py the
command. Names load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {
    "axes": ("AxisKind", "Version"),
    "cli": ("add_parser", "run_from_cli"),
    "night": ("bisect_new_failures", "night_hook"),
    "points": ("inputs_commit", "points_from_history", "record_night"),
    "report": ("answer", "write_results"),
    "run": ("BisectRequest", "Bisection", "bisect"),
    "search": ("Mark", "Search", "Step", "max_steps", "run_search"),
})

if TYPE_CHECKING:
    from harness.bisect.axes import AxisKind as AxisKind
    from harness.bisect.axes import Version as Version
    from harness.bisect.cli import add_parser as add_parser
    from harness.bisect.cli import run_from_cli as run_from_cli
    from harness.bisect.night import bisect_new_failures as bisect_new_failures
    from harness.bisect.night import night_hook as night_hook
    from harness.bisect.points import inputs_commit as inputs_commit
    from harness.bisect.points import points_from_history as points_from_history
    from harness.bisect.points import record_night as record_night
    from harness.bisect.report import answer as answer
    from harness.bisect.report import write_results as write_results
    from harness.bisect.run import Bisection as Bisection
    from harness.bisect.run import BisectRequest as BisectRequest
    from harness.bisect.run import bisect as bisect
    from harness.bisect.search import Mark as Mark
    from harness.bisect.search import Search as Search
    from harness.bisect.search import Step as Step
    from harness.bisect.search import max_steps as max_steps
    from harness.bisect.search import run_search as run_search
