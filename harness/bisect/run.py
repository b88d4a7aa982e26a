"""`harness bisect`: one failing testcase, an axis, an old and a new point; each step re-exports
(the export axis, through the cache) and re-runs only that testcase on the device, and the first
version in the new state is named with its neighbours' evidence (search.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.bisect.axes import AxisKind, Version, folder_versions, point_index
from harness.bisect.outcome import Outcome, mark_of
from harness.bisect.recipe import Exporter, RecipeRepo, build_at
from harness.bisect.search import Mark, Search, Step, max_steps, run_search
from harness.inventory import DeviceSpec, Inventory
from harness.lab import UsageError
from harness.lab.plan import ExportBuild, Plan, PlanEntry, Target
from harness.outcomes import Status
from harness.replay import Cell, cell_of, run_cell
from harness.verdict import is_bad

SayFn = Callable[[str], None]
EXPORT_TESTCASE = "test_export"


@dataclass(frozen=True)
class BisectRequest:
    plan: Plan
    inventory: Inventory
    device: str
    testcase: str
    axis: AxisKind
    good: str
    bad: str
    out_dir: Path
    model: str | None = None
    versions: tuple[str, ...] = ()  # runtime / qairt folders, in order
    failure_class: str | None = None  # the bad point's class when known (the history's); else it is run
    cache_root: Path | None = None
    budget_s: float | None = None
    verify_good: bool = False  # run the good point too (else it is trusted, as git bisect trusts it)


@dataclass
class Bisection:
    """What a bisection found: the versions, every step, the first new version (or the skipped
    range that hides it) and what the old and new points' states are."""

    request: BisectRequest
    versions: list[Version]
    search: Search
    old_state: Outcome
    new_state: Outcome
    first_new: int | None = None
    undecided: list[int] = field(default_factory=list)
    exports_built: int = 0
    exports_cached: int = 0
    wall_s: float = 0.0
    stopped: str = ""  # why it ended before deciding (the time budget)

    @property
    def fixes(self) -> bool:
        """The new state passes: the named version fixed the testcase."""
        return self.new_state.passed


def _entry(plan: Plan, testcase: str, model: str | None, cell_check: str) -> PlanEntry:
    for entry in plan.entries():
        if model not in (None, entry.model.name):
            continue
        checks = {c.name for c in entry.suite.suite.checks}  # the plan's own selection already applied
        if cell_check in checks:
            return entry
    raise UsageError(f"{plan.path}: no suite of {'model ' + model if model else 'the plan'} runs {testcase}; "
                     "name the testcase as the night's records do (test_<check>[<id>]) and the model with --model")


class Driver:
    """Runs the steps of one request: versions, the cell per version, the verdict per step."""

    def __init__(self, req: BisectRequest, say: SayFn, stop: threading.Event):
        self.req, self.say, self.stop = req, say, stop
        self.device: DeviceSpec = req.inventory.get(req.device)
        base = Cell(testcase=req.testcase, suite="", runner="", model="", model_path=Path("."))
        entry = _entry(req.plan, req.testcase, req.model, base.check)
        self.cell = cell_of(req.plan, entry, self.device, req.testcase)
        self.build: ExportBuild | None = None
        self.repo: RecipeRepo | None = None
        self.exporter = Exporter(req.cache_root, req.out_dir / "exports" / "logs", stop)
        self.built = self.cached = 0

    def versions(self) -> tuple[list[Version], int, int]:
        """The ordered versions and the indices of the good and the bad point."""
        req = self.req
        if req.axis is not AxisKind.INPUTS:
            versions = folder_versions(req.axis, list(req.versions))
            return versions, point_index(versions, req.good, "--good"), point_index(versions, req.bad, "--bad")
        exports = req.plan.exports
        self.build = exports.build_of(self.cell.model) if exports else None
        if self.build is None:
            raise UsageError(f"{req.plan.path}: model {self.cell.model!r} has no `exports:` build; the inputs "
                             "axis re-exports it from the commits of its recipe")
        self.repo = RecipeRepo.of_inputs(self.build)
        good, bad = self.repo.resolve(req.good), self.repo.resolve(req.bad)
        try:
            commits = self.repo.commits(good, bad)
        except UsageError:
            commits = self.repo.commits(bad, good)  # a fix: the failing point is the older one
        versions = [Version(c.label, c.sha) for c in commits]
        index = {v.value: i for i, v in enumerate(versions)}
        return versions, index[good], index[bad]

    def cell_at(self, version: Version, index: int) -> tuple[Cell | None, str, str]:
        """The cell for one version, or None and why not (an export that failed); its cache use."""
        option = self.req.axis.option
        if option is not None:
            return self.cell.with_(options={option: version.value}), "", ""
        assert self.build is not None and self.repo is not None
        tree = self.repo.checkout(version.value, self.req.out_dir / "trees" / version.value[:12])
        build = build_at(self.build, self.repo, tree)
        target = Target.of(self.device.soc_model)
        if target is None:
            raise UsageError(f"{self.device.name}: SoC {self.device.soc_model} has no HTP target to export for")
        folders: dict[str, Path] = {}
        use = ""
        for fmt in self._formats(build):
            result = self.exporter.export(build, target, fmt, keyed_as=self.build)
            use = result.cache.value
            self.cached += result.cache.value == "hit"
            self.built += result.cache.value != "hit"
            if not result.ok or result.folder is None:
                why = result.failure.message if result.failure else result.note
                cls = result.failure.failure_class if result.failure else "error"
                return None, f"export failed ({cls}): {why}", use
            folders[fmt] = result.folder
        return self.cell.with_(model_path=self._model_dir(build, folders, index)), "", use

    def _formats(self, build: ExportBuild) -> tuple[str, ...]:
        wanted = [f for f in build.formats if f"[{f}]" in self.req.testcase]
        return tuple(wanted) or build.formats

    def _model_dir(self, build: ExportBuild, folders: dict[str, Path], index: int) -> Path:
        """The folder the suite reads: an MNN build of one format is that export; otherwise a
        folder of one link per format (the night's `<model>/<SOC>/` layout)."""
        if build.kind == "mnn" and len(build.formats) == 1:
            return next(iter(folders.values()))
        folder = self.req.out_dir / "models" / str(index)
        folder.mkdir(parents=True, exist_ok=True)
        for fmt, path in folders.items():
            link = folder / fmt
            if not link.is_symlink():
                link.symlink_to(path)
        return folder

    def step(self, versions: list[Version], index: int, judge: Callable[[Outcome], Mark]) -> Step:
        version = versions[index]
        started = time.monotonic()
        self.say(f"bisect: step {index}: {version.label}")
        cell, why, use = self.cell_at(version, index)
        if cell is None:
            return Step(index, version.label, Mark.SKIP, why=why, cost_s=time.monotonic() - started, export_cache=use)
        run = run_cell(cell, self.req.inventory, self.req.device, self.req.out_dir / "steps" / str(index),
                       say=None, stop=self.stop)
        outcome = Outcome.of(run.record)
        mark = judge(outcome)
        why = "" if mark is not Mark.SKIP else (outcome.describe() if run.record else run.why_none)
        rec = run.record
        return Step(index, version.label, mark, status=rec.status if rec else None,
                    failure_class=rec.failure_class.value if rec and rec.failure_class else "",
                    message=rec.message if rec else "", why=why, cost_s=time.monotonic() - started,
                    export_cache=use, evidence={"records": str(run.out_dir / "night" / "records.jsonl")})


def _point_states(driver: Driver, versions: list[Version], good: int, bad: int,
                  search: Search) -> tuple[Outcome, Outcome]:
    """The old and the new point's states. The bad point is run first (unless its failure class is
    known), its failure being what the other steps are compared with; the good point too when asked."""
    req = driver.req
    bad_state = Outcome(False, req.failure_class, Status.FAILED) if req.failure_class else None
    if bad_state is None:
        first = driver.step(versions, bad, lambda o: Mark.NEW if bad == search.new else Mark.OLD)
        if first.status is None or not is_bad(first.status):
            raise UsageError(f"harness bisect: {req.testcase} did not fail at the bad point {versions[bad].label} "
                             f"on {req.device} ({first.status or first.why}); nothing to bisect")
        bad_state = Outcome(False, first.failure_class or None, first.status)
        search.steps.append(first)
    if req.verify_good:
        checked = driver.step(versions, good, lambda o: Mark.OLD if good == search.old else Mark.NEW)
        if checked.status is not Status.PASSED:
            raise UsageError(f"harness bisect: {req.testcase} does not pass at the good point {versions[good].label} "
                             f"on {req.device} ({checked.status or checked.why}: {checked.message}); nothing to bisect")
        search.steps.append(checked)
    good_state = Outcome(True, None, Status.PASSED)
    return (good_state, bad_state) if good == search.old else (bad_state, good_state)


def bisect(req: BisectRequest, *, say: SayFn, stop: threading.Event | None = None) -> Bisection:
    """Run the bisection `req` asks for."""
    started = time.monotonic()
    stop = stop or threading.Event()
    driver = Driver(req, say, stop)
    versions, good, bad = driver.versions()
    if good == bad:
        raise UsageError("harness bisect: --good and --bad name the same version")
    old, new = min(good, bad), max(good, bad)
    search = Search([v.label for v in versions], old, new)
    old_state, new_state = _point_states(driver, versions, good, bad, search)
    say(f"bisect: {len(versions)} versions on the {req.axis} axis, at most {max_steps(new - old + 1)} steps "
        f"between {versions[old].label} ({'passes' if old_state.passed else 'fails'}) and "
        f"{versions[new].label} ({'passes' if new_state.passed else 'fails'})")
    deadline = None if req.budget_s is None else started + req.budget_s
    result = Bisection(req, versions, search, old_state, new_state)

    def budget() -> bool:
        if stop.is_set():
            result.stopped = "stopped"
        elif deadline is not None and time.monotonic() > deadline:
            result.stopped = f"time budget of {req.budget_s:.0f} s spent"
        return not result.stopped

    run_search(search, lambda i: driver.step(versions, i, lambda o: mark_of(o, old_state, new_state)), budget=budget)
    result.first_new, result.undecided = search.first_new()
    result.exports_built, result.exports_cached = driver.built, driver.cached
    result.wall_s = time.monotonic() - started
    return result
