"""Does a night take the time of its slowest device, not the sum? (target: ratio <= 1.25)

    python benchmarks/lab.py [--devices 4] [--tests 4] [--test-s 0.5] [--reports] [--virtual]

Each device runs the same plan: `--tests` tests, each a real device command that takes
`--test-s` seconds (`sleep` on the device), plus the scheduler's health checks and locks.
Prints the wall time of a one-device night, of the N-device night, and their ratio.

Devices are local-transport devices by default (the host, one work folder each); with
`--virtual` they are virtual-lab adb devices behind two adb servers (needs bubblewrap and
adb), so the ratio includes the adb link.
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--tests", type=int, default=4)
    ap.add_argument("--test-s", type=float, default=0.5)
    ap.add_argument("--reports", action="store_true", help="also write JUnit/SQLite/HTML in the timed night")
    ap.add_argument("--virtual", action="store_true", help="virtual-lab adb devices instead of local ones")
    args = ap.parse_args(argv)
    job = sleeping_job(args.tests, args.test_s)
    with tempfile.TemporaryDirectory(prefix="bench-lab-") as tmp:
        root = Path(tmp)
        lab = None
        if args.virtual:
            from virtual_lab.lab import LabDeviceConfig, VirtualLab

            lab = VirtualLab(root / "vlab", [LabDeviceConfig(f"dev{i}", adb_server=i % 2, tags=("bench",))
                                             for i in range(args.devices)]).start()
            inv = lab.inventory
        else:
            inv = local_inventory(root, args.devices)
        try:
            names = sorted(inv.devices)
            night_time(root, inv, names[:1], job, args.reports)  # warm-up (imports, first connections)
            single, n1 = night_time(root, inv, names[:1], job, args.reports)
            multi, nn = night_time(root, inv, names, job, args.reports)
        finally:
            if lab is not None:
                lab.stop()
    ratio = multi / single
    kind = "virtual adb" if args.virtual else "local"
    print(f"devices: {args.devices} {kind}, {args.tests} tests x {args.test_s:.2f} s each "
          f"(device work {args.tests * args.test_s:.2f} s per device)")
    print(f"one-device night:  {single:6.2f} s ({n1} results)")
    print(f"{args.devices}-device night:    {multi:6.2f} s ({nn} results); serial would be ~{single * args.devices:.2f} s")
    print(f"ratio parallel/single: {ratio:.3f} (target <= 1.25): {'OK' if ratio <= 1.25 else 'OVER TARGET'}")
    return 0 if ratio <= 1.25 else 1


if __name__ == "__main__":
    sys.exit(main())
