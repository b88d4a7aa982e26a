"""Does a night take the time of its slowest device, not the sum? (target: ratio <= 1.25)

    python benchmarks/lab.py [--devices 4,8,16] [--tests 4] [--test-s 0.5] [--repeat 3] [--reports] [--virtual]

Each device runs the same plan: `--tests` tests, each a real device command that takes
`--test-s` seconds (`sleep` on the device), plus the scheduler's health checks and claims.
Prints, per device count, the median wall time of `--repeat` nights and its ratio to the
median one-device night (nights alternate, so a load spike on a shared machine hits all rows).

Devices are local-transport devices by default (the host, one work folder each); with
`--virtual` they are virtual-lab adb devices behind two adb servers (needs bubblewrap and
adb), so the ratio includes the adb link.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.inventory import Inventory, load_inventory  # noqa: E402
from harness.lab.plan import load_plan  # noqa: E402
from harness.lab.scheduler import DeviceContext, run_night  # noqa: E402
from harness.report.records import TestRecord  # noqa: E402


def sleeping_job(tests: int, seconds: float):
    def job(ctx: DeviceContext):
        for i in range(tests):
            name = f"sleep-{i}"
            if ctx.already_done(name):
                continue
            res = ctx.transport.shell(["sleep", str(seconds)], timeout=seconds + 60)
            yield TestRecord(name=name, suite=ctx.entry.suite.name, device=ctx.device.name,
                             status="passed" if res.ok else "failed", duration_s=res.duration_s,
                             message="" if res.ok else f"exit {res.exit_code}")
    return job


def local_inventory(root: Path, n: int) -> Inventory:
    socs = ["SM8750", "SM8650", "SA8295", "SM8550"]
    devices = [{"name": f"dev{i}", "transport": "local", "soc": socs[i % len(socs)],
                "work_dir": str(root / f"dev{i}"), "tags": ["bench"]} for i in range(n)]
    path = root / "devices.yaml"
    path.write_text(yaml.safe_dump({"devices": devices}))
    return load_inventory(path)


def write_plan(root: Path, devices: list[str]) -> Path:
    (root / "export").mkdir(exist_ok=True)
    path = root / f"plan-{len(devices)}.yaml"
    path.write_text(yaml.safe_dump({
        "name": "bench", "devices": devices, "models": {"m": {"path": "export"}},
        "suites": [{"name": "bench", "models": ["m"], "backends": ["cpu"]}],
        "health": {"min_free_mb": 1}, "locks": {"dir": "locks", "wait_s": 5},
        "options": {"runtime_dir": "export"},  # the sleeping job runs no llm_demo
    }))
    return path


def night_time(root: Path, inv: Inventory, devices: list[str], job, reports: bool) -> tuple[float, int]:
    plan = load_plan(write_plan(root, devices))
    out = root / f"out-{len(devices)}-{time.monotonic_ns()}"
    started = time.monotonic()
    night = run_night(plan, inv, out, job, say=lambda m: None, reports=reports, history_db=root / "h.sqlite")
    wall = time.monotonic() - started
    bad = [r for r in night.records() if r.status != "passed"]
    if bad:
        raise SystemExit(f"benchmark night had failures: {[(r.device, r.name, r.message) for r in bad]}")
    return wall, len(night.records())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/lab.py")
    ap.add_argument("--devices", default="4,8,16", help="device counts, comma-separated")
    ap.add_argument("--tests", type=int, default=4)
    ap.add_argument("--test-s", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=3, help="nights per row; the median is reported")
    ap.add_argument("--reports", action="store_true", help="also write JUnit/SQLite/HTML in the timed night")
    ap.add_argument("--virtual", action="store_true", help="virtual-lab adb devices instead of local ones")
    args = ap.parse_args(argv)
    counts = sorted({int(c) for c in args.devices.split(",")})
    job = sleeping_job(args.tests, args.test_s)
    walls: dict[int, list[float]] = {n: [] for n in [1, *counts]}
    with tempfile.TemporaryDirectory(prefix="bench-lab-") as tmp:
        root = Path(tmp)
        lab = None
        if args.virtual:
            from virtual_lab.lab import LabDeviceConfig, VirtualLab

            lab = VirtualLab(root / "vlab", [LabDeviceConfig(f"dev{i:02d}", adb_server=i % 2, tags=("bench",))
                                             for i in range(max(counts))]).start()
            inv = lab.inventory
        else:
            inv = local_inventory(root, max(counts))
        try:
            names = sorted(inv.devices)
            night_time(root, inv, names, job, args.reports)  # warm-up (imports, first connections)
            for _ in range(args.repeat):
                for n in walls:
                    walls[n].append(night_time(root, inv, names[:n], job, args.reports)[0])
        finally:
            if lab is not None:
                lab.stop()
    single = statistics.median(walls[1])
    kind = "virtual adb" if args.virtual else "local"
    print(f"{kind} devices, {args.tests} tests x {args.test_s:.2f} s each (device work {args.tests * args.test_s:.2f} s "
          f"per device), median of {args.repeat} nights per row")
    print(f"{'devices':>7}  {'median s':>8}  {'ratio':>6}  nights (s)")
    worst = 0.0
    for n, values in walls.items():
        ratio = statistics.median(values) / single
        worst = max(worst, ratio)
        print(f"{n:>7}  {statistics.median(values):8.2f}  {ratio:6.3f}  {' '.join(f'{v:.2f}' for v in values)}")
    print(f"worst ratio {worst:.3f} (target <= 1.25): {'OK' if worst <= 1.25 else 'OVER TARGET'}")
    return 0 if worst <= 1.25 else 1


if __name__ == "__main__":
    sys.exit(main())
