"""Cost of one bisection step: the export served from the cache vs built, and the cell's run.

Two recipes over a 13-commit repository (tests/bisect/recipe_kit.py), each bisected twice
(the second bisection is all cache hits), printing per step the export's cache use and the
step's wall time:

- `vlab` (default): the virtual lab's Qwen3 export generator (cheap export) on a virtual
  OnePlus 13; the step is dominated by the cell's run.
- `--real-lowering`: the recipe's export is ExecuTorch's real QNN lowering of
  examples/et_qnn/lower_decoder.py (30 s - 3 min each on a 2-core host), the fault planted by
  `--plant-mul-range-fault` at one commit; judged by the export stage only (testcase
  test_export: the lowering must succeed and validate). Needs the executorch and qnn extras.

    nice -n 10 python benchmarks/bisect_step.py [--real-lowering]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _summary(label: str, result: dict) -> None:
    hits = [s["cost_s"] for s in result["steps"] if s["export_cache"] == "hit"]
    built = [s["cost_s"] for s in result["steps"] if s["export_cache"] and s["export_cache"] != "hit"]
    print(f"{label}: {len(result['steps'])} steps, first new {result['first_new_version']!r}, "
          f"{result['exports_built']} built, {result['exports_cached']} from the cache, wall {result['wall_s']} s")
    for name, xs in (("step with export built", built), ("step with export from the cache", hits)):
        if xs:
            print(f"  {name}: median {statistics.median(xs):.2f} s (n={len(xs)}, min {min(xs):.2f}, max {max(xs):.2f})")


def run_vlab(tmp: Path) -> None:
    from harness.cli import main
    from tests.bisect.recipe_kit import make_recipe_repo, write_plan
    from virtual_lab.lab import VirtualLab

    shas = make_recipe_repo(tmp / "repo", n=13, fault_at=8)
    with VirtualLab(tmp / "vlab") as lab:
        plan = write_plan(tmp / "plan.json", tmp / "repo", lab.runtime_dir("v79"), lab.qnn_sdk_dir, "oneplus13")
        for run in ("first", "again"):
            out = tmp / run
            code = main(["--file", str(lab.devices_yaml), "bisect", "--plan", str(plan), "--device", "oneplus13",
                         "--testcase", "test_generation[qnn-france]", "--axis", "inputs", "--good", shas[0],
                         "--bad", shas[-1], "--out", str(out)])
            assert code == 0, code
            _summary(f"vlab {run}", json.loads((out / "bisect.json").read_text()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real-lowering", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bisect-bench-") as t:
        tmp = Path(t)
        os.environ["HARNESS_CACHE_DIR"] = str(tmp / "cache")
        if args.real_lowering:
            from benchmarks.bisect_lowering import run_real

            run_real(tmp)
        else:
            run_vlab(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
