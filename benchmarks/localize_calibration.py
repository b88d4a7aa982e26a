"""Calibrate localization's threshold on real lowerings, on the host's HTP emulator.

    python benchmarks/localize_calibration.py OUT_DIR [--formats 16a8w 16a4w 8a8w]
        [--shapes 64x2 96x3 48x6x3] [--fault-layers 0 1] [--soc SM8650]

For each format and model shape (DIMxLAYERS[xHEADS], any; SwiGLU): the example exporter's debug build, healthy
and with the seed fault planted at each layer (`--plant-mul-range-fault`), each run once on the
emulator and compared per op (`localize`). Prints one row per program: the lowest judged op (the
healthy floor) and, for a planted fault, the planted MUL's SQNR, cosine and clip share and the first
op under each candidate threshold. Lowerings are kept in OUT_DIR and reused when present (each is
30-90 s on a loaded 2-core host). Needs the qnn extra. The numbers feed docs/localize.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.checks.localize import DebugFiles, localize  # noqa: E402
from harness.qnn import find_host_qnn  # noqa: E402
from harness.runners.executorch import run_debug_program  # noqa: E402

CANDIDATES = (10.0, 15.0, 20.0, 25.0, 30.0)


def build(out: Path, fmt: str, dim: int, layers: int, fault: int | None, soc: str, env: dict[str, str],
          heads: int = 2) -> Path:
    name = f"{fmt}-d{dim}-l{layers}" + ("" if heads == 2 else f"-h{heads}") + "-" + (
        "healthy" if fault is None else f"fault{fault}")
    export = out / name / "export"
    if not (export / "qnn_encodings.json").is_file():
        export.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, str(REPO / "examples/et_qnn/lower_decoder.py"), "--soc", soc, "--format", fmt,
                "--dim", str(dim), "--layers", str(layers), "--heads", str(heads), "--mlp", "swiglu",
                "--out", str(export), "--debug-program"]
        if fault is not None:
            argv += ["--plant-mul-range-fault", str(fault)]
        subprocess.run(argv, check=True, env=env, capture_output=True)
    return export


def measure(export: Path, env: dict[str, str]) -> dict[str, object]:
    run = run_debug_program(DebugFiles(export), export.parent / "run", env)
    result = localize(run)
    planted = json.loads((export / "qnn_encodings.json").read_text()).get("planted_fault")
    judged = [o for o in result.ops if o.judged]
    worst = min(judged, key=lambda o: o.sqnr_db)
    row: dict[str, object] = {"program": export.parent.name, "ops": len(result.ops), "judged": len(judged),
                              "floor_db": round(worst.sqnr_db, 1), "floor_op": f"{worst.node} ({worst.layer})"}
    if planted:
        op = next(o for o in result.ops if o.node == planted)
        row.update(planted=planted, planted_db=round(op.sqnr_db, 1), planted_cos=round(op.cosine, 3),
                   planted_clip=round(op.saturation, 3),
                   floor_before_db=round(min((o.sqnr_db for o in judged if o.index < op.index), default=99.0), 1))
    row["first_under"] = {str(t): next((o.node for o in judged if o.sqnr_db < t), None) for t in CANDIDATES}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--formats", nargs="+", default=["16a8w", "16a4w", "8a8w"])
    ap.add_argument("--shapes", nargs="+", default=["64x2", "96x3"])
    ap.add_argument("--fault-layers", nargs="*", type=int, default=[],
                    help="layers to plant the fault at (default: the first, the middle and the last)")
    ap.add_argument("--soc", default="SM8650")
    args = ap.parse_args(argv)
    import os

    env = find_host_qnn().child_env(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    for fmt in args.formats:
        for shape in args.shapes:
            dim, layers, *rest = (int(v) for v in shape.split("x"))  # DIMxLAYERS[xHEADS]
            faults = args.fault_layers if args.fault_layers else [0, layers // 2, layers - 1]
            for fault in [None, *sorted({f for f in faults if f < layers})]:
                row = measure(build(args.out, fmt, dim, layers, fault, args.soc, env, *rest), env)
                print(json.dumps({"format": fmt, **row}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
