"""Calibrate the teacher-forced lines on real 16-bit noise (a report, not a test).

    python benchmarks/logits_diff_calibration.py run WORKDIR OUT.jsonl [--cond NAME ...]
    python benchmarks/logits_diff_calibration.py table OUT.jsonl

`run`: makes the fault conditions as `coherence_generate.prepare` does (in WORKDIR, a scratch
folder: the export in ../shared is only read) and runs MNN's real `llm_logits_diff` with
A = the export on the CPU (`base`, greedy) and B = each condition (greedy) on every prompt of
`logits_diff_prompts.txt` (36 prompts of our own, none from the dev corpus), 32 steps, one
thread. One JSON line per (condition, prompt): the figures `python -m harness.runners.logits_diff
--json` gives; a rerun skips what OUT already holds.

Conditions (docs/coherence.md, docs/logits-diff.md#calibration-on-real-16-bit-noise):
- `base`: A itself (the identical config: the zero line);
- `calibrated`: every MLP Mul fake-quantized with a range that holds all products (a healthy
  16-bit export);
- `sat_N[_M...]`: the export's inherited range on those blocks; `sat_0_..._29` = every block,
  i.e. the export as shipped.

`table`: the calibration table (per condition: verdicts under the thresholds in force, mean KL
min/median/max, flip share median/max, NLL gap median/max, and the per-export verdict).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coherence_generate import MODEL, RUNTIME, prepare  # noqa: E402

from harness.runners import (
    TOOL,  # noqa: E402
    render_prompt_file,  # noqa: E402
)
from harness.runners.logits_diff import analyse  # noqa: E402

PROMPTS = Path(__file__).resolve().parent / "logits_diff_prompts.txt"
EVERY_BLOCK = "sat_" + "_".join(str(b) for b in range(30))
DEFAULT_CONDS = ("calibrated", EVERY_BLOCK, "sat_0", "sat_2", "sat_3", "sat_10", "sat_20", "sat_3_4_5", "base")
STEPS = 32


def run_one(runtime: Path, a: Path, b: Path, prompt: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tf-calib-") as tmp:   # the tool writes tmp_diff_a/b here
        (Path(tmp) / "prompt.txt").write_text(render_prompt_file([prompt]), encoding="utf-8")
        env = dict(os.environ, LD_LIBRARY_PATH=str(runtime))
        proc = subprocess.run([str(runtime / TOOL), str(a), str(b), "prompt.txt", str(STEPS)], cwd=tmp,
                              capture_output=True, text=True, errors="replace", env=env, timeout=900)
    # The whole capture is kept: `table` judges it again with the thresholds in force.
    return {"stdout": proc.stdout, "stderr": proc.stderr, "exit_code": proc.returncode}


def judged(d: dict[str, Any]) -> dict[str, Any]:
    j = analyse(d["stdout"], d["stderr"], exit_code=d["exit_code"]).to_json()
    j.pop("rows")
    return j


def cmd_run(args: argparse.Namespace) -> int:
    prompts = [p.strip() for p in PROMPTS.read_text().splitlines() if p.strip()]
    done: set[tuple[str, str]] = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            d = json.loads(line)
            done.add((d["condition"], d["prompt"]))
    a = prepare(args.workdir, args.model, "base") / "greedy.json"
    with args.out.open("a", encoding="utf-8") as out:
        for cond in args.cond:
            b = prepare(args.workdir, args.model, cond) / "greedy.json"
            for p in prompts:
                if (cond, p) in done:
                    continue
                d = run_one(args.runtime, a, b, p)
                out.write(json.dumps({"condition": cond, "prompt": p, **d}, ensure_ascii=False) + "\n")
                out.flush()
            print(f"{cond}: done", file=sys.stderr, flush=True)
    return 0


def _label(cond: str) -> str:
    return {"base": "A itself", "calibrated": "calibrated (healthy a16)",
            EVERY_BLOCK: "every block (as shipped)"}.get(cond, cond)


def table(rows: list[dict[str, Any]]) -> str:
    from harness.checks import PromptFigures, judge_export
    from harness.evidence import TeacherForced

    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in rows:
        by[d["condition"]].append(judged(d))
    out = ["| B | prompts | verdicts per prompt | mean KL min / median / max | flip share median (max) "
           "| NLL gap median (max) | export verdict |",
           "|---|---|---|---|---|---|---|"]
    for cond, ds in by.items():
        verdicts = Counter(d["verdict"] for d in ds)
        kls = [d["mean_kl"] for d in ds if d["mean_kl"] is not None]
        shares = [d["disagreements"] / d["counted_steps"] for d in ds if d["counted_steps"]]
        gaps = [d["nll_gap"] for d in ds if d["nll_gap"] is not None]
        export = judge_export([PromptFigures.of_evidence(TeacherForced.of_json(d)) for d in ds])
        out.append(f"| {_label(cond)} | {len(ds)} | "
                   + ", ".join(f"{v} {n}" for v, n in verdicts.most_common())
                   + f" | {min(kls):.3f} / {statistics.median(kls):.3f} / {max(kls):.3f}"
                   + f" | {statistics.median(shares):.3f} ({max(shares):.2f})"
                   + f" | {statistics.median(gaps):.3f} ({max(gaps):.3f}) | {export.verdict} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("workdir", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--model", type=Path, default=MODEL)
    r.add_argument("--runtime", type=Path, default=RUNTIME)
    r.add_argument("--cond", nargs="+", default=list(DEFAULT_CONDS))
    t = sub.add_parser("table")
    t.add_argument("out", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        return cmd_run(args)
    print(table([json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
