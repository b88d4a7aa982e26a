"""Per-op cycles night to night, end to end on the host's HTP emulator: real nights (`harness lab
run`) of the example decoder (examples/et_qnn/lower_decoder.py, lowered by the night's export
stage), each running the ExecuTorch suite's ETDump check (the plain program with
`--profile_level 2`), into one history.

    python benchmarks/op_cycles_nights.py [--out DIR] [--repeats 2] [--layers 2] [--dim 256]

1. `--repeats` nights of the same program (the export cache serves it after the first): the
   noise, each op's largest over smallest cycles across those nights, printed with the ops'
   sizes; no op of them may be named slower (harness/report/op_history.py NOISE).
2. one night with layer 1's MLP 8x wider (`--widen-layer 1`): the night must name ops of
   `layers.1` as slower than the last good night, and no op outside it; its report.html holds
   the per-op plot.

Prints one JSON line at the end (noise, the ops named, the report's path); exit 1 when the
heavier layer is not what the night names. Emulator cycles are not device cycles, and on a
shared host they follow its load: read the noise it prints beside the verdict.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "et_qnn"


def _plan(out: Path, args: argparse.Namespace, widen: bool) -> Path:
    command = ["python", str(EXAMPLE / "lower_decoder.py"), "--soc", "{soc}", "--format", "{format}", "--out", "{out}",
               "--layers", str(args.layers), "--dim", str(args.dim), "--mlp", "swiglu", "--etrecord"]
    if widen:
        command += ["--widen-layer", "1"]
    plan = {"name": "op-cycles", "devices": ["emu-sm8650"],
            "exports": {"builds": [{"model": "decoder", "kind": "executorch", "command": command,
                                    "targets": ["SM8650"], "formats": [args.format], "qnn_host": True,
                                    "inputs": [str(EXAMPLE / "lower_decoder.py")], "timeout_s": 1800}]},
            "suites": [{"name": "executorch_qnn", "models": ["decoder"], "checks": ["etdump_profile"],
                        "timeout_s": 900}],
            "history": {"db": str(out / "history.sqlite")}, "health": {"min_battery_pct": 0}}
    path = out / ("plan-heavier.yaml" if widen else "plan.yaml")
    path.write_text(yaml.safe_dump(plan))
    return path


def _devices(out: Path) -> Path:
    path = out / "devices.yaml"
    path.write_text(yaml.safe_dump({"devices": [{"name": "emu-sm8650", "transport": "local", "soc": "SM8650",
                                                 "htp": "emulator", "work_dir": str(out / "work")}]}))
    return path


def _night(out: Path, devices: Path, plan: Path, name: str) -> tuple[int, str]:
    night = out / name
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "--file", str(devices), "lab", "run", "--plan", str(plan),
                           "--out", str(night), "--lock-dir", str(out / "locks")], cwd=REPO, text=True,
                          capture_output=True, timeout=3600)
    print(f"{name}: exit {proc.returncode}: {proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ''}",
          flush=True)
    if proc.returncode not in (0, 1):
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
    return proc.returncode, proc.stdout


def _ops(db: Path) -> dict[str, dict[str, tuple[str, float]]]:
    """night -> node -> (module, cycles), nights in order."""
    out: dict[str, dict[str, tuple[str, float]]] = {}
    with sqlite3.connect(db) as conn:
        for night, node, module, cycles in conn.execute(
                "SELECT o.night_id, node, module, cycles FROM op_cycles o JOIN nights n USING (night_id) "
                "ORDER BY n.started_at, o.rowid"):
            out.setdefault(night, {})[node] = (module, float(cycles))
    return out


def _noise(nights: list[dict[str, tuple[str, float]]], floor: float) -> dict[str, float]:
    ratios = []
    for node in nights[0]:
        vals = [n[node][1] for n in nights if node in n]
        if len(vals) == len(nights) and max(vals) >= floor:
            ratios.append(max(vals) / max(min(vals), 1.0))
    ratios.sort()
    return {"ops": len(ratios), "median": ratios[len(ratios) // 2] if ratios else 0.0,
            "max": ratios[-1] if ratios else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=2, help="nights of the same program (the noise)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--format", default="16a8w")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="op-cycles-"))
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(REPO))
    from harness.report.op_history import MIN_RISE_CYCLES

    devices, plain, heavier = _devices(out), _plan(out, args, False), _plan(out, args, True)
    said = []
    for i in range(args.repeats):
        said.append(_night(out, devices, plain, f"night-{i + 1}"))
    code, text = _night(out, devices, heavier, "night-heavier")
    by_night = _ops(out / "history.sqlite")
    nights = list(by_night.values())
    noise = _noise(nights[:-1], MIN_RISE_CYCLES) if len(nights) > 2 else {}
    false_alarms = [line for _, t in said[1:] for line in t.splitlines() if "op-cycles" in line or "slower:" in line]
    named = [line.strip() for line in text.splitlines() if "slower:" in line]
    in_layer = [n for n in named if "layers.1" in n]
    ok = bool(named) and len(in_layer) == len(named) and not false_alarms
    print(json.dumps({"out": str(out), "noise": noise, "repeat_nights_flagged": false_alarms, "named": named,
                      "heavier_night_exit": code, "report": str(out / "night-heavier" / "report.html"), "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
