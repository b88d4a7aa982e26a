"""`harness bisect` (docs/bisect.md): which version broke (or fixed) a testcase, on one of three
axes: the export's inputs (commits of its recipe repository, re-exported through the export
cache), the runtime (ordered runtime folders), QAIRT (ordered SDK roots). search.py the
bisection (git bisect's, skips included), axes.py the versions, recipe.py the export axis,
outcome.py a step's state, run.py the steps, report.py the answer and its records, points.py the
good and bad points from the history, cli.py the command. Names load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {
    "axes": ("AxisKind", "Version"),
    "run": ("BisectRequest", "Bisection", "bisect"),
    "search": ("Mark", "Search", "Step", "max_steps", "run_search"),
    "report": ("answer", "write_results"),
})

if TYPE_CHECKING:
    from harness.bisect.axes import AxisKind as AxisKind
    from harness.bisect.axes import Version as Version
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
