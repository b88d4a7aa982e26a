"""`harness bisect`: the command's arguments to a BisectRequest, its answer printed and written."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TypeVar

from harness.inventory import Inventory

P = TypeVar("P", bound=argparse.ArgumentParser)  # the front door's own parser class


def add_parser(sub: argparse._SubParsersAction[P]) -> P:
    p = sub.add_parser(
        "bisect", help="the first version (commit, runtime, QAIRT) where a testcase fails or is fixed")
    p.add_argument("--plan", required=True, help="the night's plan: the testcase's suite, model, options, exports")
    p.add_argument("--device", required=True, help="the device the steps run on")
    p.add_argument("--testcase", required=True, help="as the night's records name it: test_generation[qnn/qnn-cat]")
    p.add_argument("--model", help="the plan's model (when several suites could run the testcase)")
    p.add_argument("--axis", required=True, choices=["inputs", "runtime", "qairt"],
                   help="inputs: commits of the repository holding the build's inputs; runtime: --versions runtime "
                        "folders; qairt: --versions SDK roots")
    p.add_argument("--good", help="the version where it passes (a commit; a folder, its name or position)")
    p.add_argument("--bad", help="the version where it fails")
    p.add_argument("--from-history", metavar="DB", help="take --good/--bad from the history: the last night it "
                   "passed and the first night it failed (docs/bisect.md#points-from-the-history)")
    p.add_argument("--versions", nargs="+", default=[], metavar="DIR", help="the runtime folders or SDK roots, oldest first")
    p.add_argument("--failure-class", help="the bad point's failure class (else the bad point is run first)")
    p.add_argument("--verify-good", action="store_true", help="run the good point first and stop if it does not pass")
    p.add_argument("--budget-s", type=float, help="stop after this many seconds (the answer is then a range)")
    p.add_argument("--out", default="bisect-out", help="folder for bisect.json, records, JUnit, HTML")
    p.add_argument("--history", help="history database to add the bisection to (default: beside --out)")
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    return p


def run_from_cli(args: argparse.Namespace, inventory: Inventory) -> int:
    from harness.bisect.axes import AxisKind
    from harness.bisect.points import points_from_history
    from harness.bisect.report import answer, write_results
    from harness.bisect.run import BisectRequest, bisect
    from harness.hostfiles import prepare_output_dir
    from harness.lab import ExitCode, UsageError, new_run_id
    from harness.lab.plan import load_plan

    plan = load_plan(Path(args.plan))
    out = prepare_output_dir(Path(args.out), "output folder (--out)")
    good, bad, failure_class = args.good, args.bad, args.failure_class
    if args.from_history:
        points = points_from_history(Path(args.from_history), args.device, args.testcase, AxisKind(args.axis))
        good, bad = good or points.good, bad or points.bad
        failure_class = failure_class or points.failure_class
        print(f"harness: bisect: from the history: {points.describe()}", file=sys.stderr)
    if not good or not bad:
        raise UsageError("harness bisect: give --good and --bad (or --from-history DB)")
    req = BisectRequest(plan=plan, inventory=inventory, device=args.device, testcase=args.testcase,
                        axis=AxisKind(args.axis), good=good, bad=bad, out_dir=out, model=args.model,
                        versions=tuple(args.versions), failure_class=failure_class, budget_s=args.budget_s,
                        verify_good=args.verify_good)
    result = bisect(req, say=lambda m: print(f"harness: {m}", file=sys.stderr, flush=True))
    paths, problems = write_results(result, out, run_id=new_run_id(),
                                    history_db=Path(args.history) if args.history else out.parent / "history.sqlite")
    print(answer(result))
    print(f"{len(result.search.steps)} steps, {result.exports_built} exports built, {result.exports_cached} from the "
          f"cache, {result.wall_s:.1f} s; {paths['json']}")
    for problem in problems:
        print(f"harness: {problem}", file=sys.stderr)
    return int(ExitCode.OK if result.first_new is not None and not problems else ExitCode.TESTS_FAILED)
