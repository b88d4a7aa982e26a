"""The cost of localization against the cell's plain run, on the host's HTP emulator
(docs/localize.md#cost; issue 33: the added run and comparison take at most 3x the cell's plain run).

    python benchmarks/localize_cost.py WORK [--format 16a8w] [--layers 3] [--dim 96] [--soc SM8750]
        [--fault-layer 1] [--repeats 2]

In WORK, once (kept and reused with the timings measured then): the example exporter's program
(`lower_decoder.py`, its reference/ included) and its debug build (`--debug-program`, in the
program's debug/ folder), each lowering a whole process timed on the wall, one at a time. Then,
`--repeats` times:

- the cell's plain run: the suite's format cell (`quant_format_runs`) on an emulated device, as
  pytest runs it: the LLM runner on the suite's prompt and the teacher-forced run over the
  reference (two processes), its judgement included;
- localization: the debug run (`run_debug_program`: a whole process, load and one 16-token forward
  with an ETDump and a debug buffer sized from the program) and the comparison (`localize`:
  ExecuTorch's Inspector, QNN's SQNR comparator, the judgement) in this process; the forward's own
  time is read from the run's ETDump (`Method::execute`).

Prints medians and the ratio localization / plain cell (exit 1 over 3x). The fault is planted by
default (localization runs on failing cells); emulator timings are not device speed. Needs the qnn extra.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from harness.checks.localize import DebugFiles, debug_buffer_size, localize  # noqa: E402
from harness.inventory import load_inventory  # noqa: E402
from harness.qnn import find_host_qnn  # noqa: E402
from harness.report import TestRecord  # noqa: E402
from harness.runners.executorch import run_debug_program  # noqa: E402
from harness.suite import ET_FORMAT_RUNS, EXECUTORCH_QNN, Instance, run_check  # noqa: E402
from harness.suite.executorch import build_et_input  # noqa: E402
from harness.transport import LocalTransport  # noqa: E402

EXAMPLE = REPO / "examples" / "et_qnn"
TIMINGS = "lowering_s.json"


def _lower(out: Path, script: str, argv: list[str], env: dict[str, str]) -> float:
    """One lowering into `out` (a temporary folder renamed), its wall time."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(EXAMPLE / script), *argv, "--out", str(tmp)],
                          env=env, capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"lowering {out} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    tmp.rename(out)
    return took


def build(work: Path, args: argparse.Namespace, env: dict[str, str]) -> tuple[Path, dict[str, float]]:
    """WORK/<name>/<format>/ (the program) with its debug build in debug/; the lowerings' times."""
    name = f"{args.soc}-{args.layers}x{args.dim}-" + ("healthy" if args.fault_layer is None else f"fault{args.fault_layer}")
    program = work / name / args.format
    timings_file = work / name / TIMINGS
    timings: dict[str, float] = json.loads(timings_file.read_text()) if timings_file.is_file() else {}
    common = ["--soc", args.soc, "--format", args.format, "--layers", str(args.layers), "--dim", str(args.dim),
              "--heads", str(args.heads), "--mlp", "swiglu"]
    if not (program / "build.json").is_file():
        program.parent.mkdir(parents=True, exist_ok=True)
        if args.fault_layer is None:
            timings["plain"] = _lower(program, "lower_decoder.py", common, env)
        else:  # plant_fault.py: lower_decoder.py with the fault planted before convert
            timings["plain"] = _lower(program, "plant_fault.py", ["--fault-layer", str(args.fault_layer), *common], env)
    if DebugFiles(program / "debug").missing_build():
        plant = [] if args.fault_layer is None else ["--plant-mul-range-fault", str(args.fault_layer)]
        timings["debug"] = _lower(program / "debug", "lower_decoder.py", [*common, "--debug-program", *plant], env)
    timings_file.write_text(json.dumps(timings))
    return program, timings


def _cell_run(model_dir: Path, quant: str, soc: str, tmp: Path) -> tuple[float, TestRecord]:
    inv = tmp / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": soc,
                                                "htp": "emulator", "work_dir": str(tmp / "device")}]}))
    transport = LocalTransport(load_inventory(inv).get("emu"))
    inp = build_et_input(transport, model_dir, work=tmp / "work", device_runtime=None)
    rec = TestRecord(name=f"test_quant_format_runs[{quant}]", suite="executorch_qnn", device="emu")
    started = time.perf_counter()
    try:
        run_check(EXECUTORCH_QNN, ET_FORMAT_RUNS, Instance(quant=quant), inp, rec)
    finally:
        inp.cleanup()
    return time.perf_counter() - started, rec


def forward_seconds(etdump: Path) -> float | None:
    """The debug forward's own time (`Method::execute`) from the run's ETDump, via ExecuTorch's Inspector."""
    from executorch.devtools import Inspector

    for block in Inspector(etdump_path=str(etdump)).event_blocks:
        for event in block.events:
            if event.name == "Method::execute" and event.perf_data is not None:
                return float(event.perf_data.p50) / 1000.0  # the Inspector's default target scale: ms
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--format", default="16a8w")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dim", type=int, default=96)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--soc", default="SM8750")
    ap.add_argument("--fault-layer", type=int, default=1, help="-1: the healthy program")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    args.fault_layer = None if args.fault_layer < 0 else args.fault_layer
    args.work.mkdir(parents=True, exist_ok=True)
    env = find_host_qnn().child_env({**os.environ, "PYTHONPATH": str(REPO)})
    program, lowering = build(args.work, args, env)
    export = DebugFiles(program / "debug")
    cell, run_s, compare_s, forward = [], [], [], []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="localize-cost-") as scratch:
            took, rec = _cell_run(program.parent, args.format, args.soc, Path(scratch))
            cell.append(took)
            started = time.perf_counter()
            files = run_debug_program(export, Path(scratch) / "debug-run", env)
            middle = time.perf_counter()
            result = localize(files, args.format)
            compare_s.append(time.perf_counter() - middle)
            run_s.append(middle - started)
            forward.append(forward_seconds(files.path("etdump.etdp")))
        print(f"repeat {i + 1}: cell {took:.1f} s ({rec.status}; reference run {rec.extras.get('reference_run_s')} s), "
              f"debug run {run_s[-1]:.1f} s (forward {forward[-1]} s), comparison {compare_s[-1]:.1f} s", flush=True)
    med = statistics.median
    local = med(run_s) + med(compare_s)
    ratio = local / med(cell)
    print(f"lowering: plain {lowering.get('plain', float('nan')):.0f} s, debug {lowering.get('debug', float('nan')):.0f} s; "
          f"cell's plain run {med(cell):.1f} s; localization {local:.1f} s (debug run {med(run_s):.1f} s, its forward "
          f"{med(f for f in forward if f is not None) if any(forward) else float('nan'):.2f} s; comparison "
          f"{med(compare_s):.1f} s); ratio {ratio:.2f} (target <= 3); debug buffer "
          f"{debug_buffer_size(export.encodings())} bytes; load average {os.getloadavg()[0]:.1f}; {result.summary()}")
    return 0 if ratio <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
