"""Does a night take the time of its slowest device, not the sum? (target: ratio <= 1.25)

    python benchmarks/lab.py [--devices 4,8,16] [--tests 4] [--test-s 0.5] [--repeat 3] [--reports] [--virtual]

Each device runs the same plan: `--tests` tests, each a real device command that takes
`--test-s` seconds (`sleep` on the device), plus the scheduler's health checks and claims.
Prints, per device count, the median wall time of `--repeat` nights and its ratio to the
median one-device night (nights alternate, so a load spike on a shared machine hits all rows).

Devices are local-transport devices by default (the host, one work folder each); with
`--virtual` they are virtual-lab adb devices behind two adb servers (needs bubblewrap and
adb), so the ratio includes the adb link. The virtual lab runs in its own process, as real
devices run their own adbd: in the harness's process its 16 emulated adbds would share the
harness's GIL (`--lab-in-process` measures that setup too).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.inventory import Inventory, load_inventory  # noqa: E402
from harness.lab import DeviceContext, run_night  # noqa: E402
from harness.lab.plan import load_plan  # noqa: E402
from harness.outcomes import FailureClass  # noqa: E402
from harness.report import TestRecord  # noqa: E402
from harness.verdict import Verdict  # noqa: E402


def sleeping_job(tests: int, seconds: float):
    def job(ctx: DeviceContext):
        for i in range(tests):
            name = f"sleep-{i}"
            if ctx.already_done(name):
                continue
            res = ctx.transport.shell(["sleep", str(seconds)], timeout=seconds + 60)
            rec = TestRecord(name=name, suite=ctx.entry.suite.name, device=ctx.device.name,
                             duration_s=res.duration_s)
            if not res.ok:
                rec.set_verdict(Verdict.failed(FailureClass.RUNTIME_ERROR, f"exit {res.exit_code}"))
            yield rec
    return job


def local_inventory(root: Path, n: int) -> Inventory:
    socs = ["SM8750", "SM8650", "SA8295", "SM8550"]
    devices = [{"name": f"dev{i}", "transport": "local", "soc": socs[i % len(socs)], "htp": "emulator",
                "work_dir": str(root / f"dev{i}"), "tags": ["bench"]} for i in range(n)]
    path = root / "devices.yaml"
    path.write_text(yaml.safe_dump({"devices": devices}))
    return load_inventory(path)


@contextmanager
def _local(root: Path, n: int) -> Iterator[Inventory]:
    yield local_inventory(root, n)


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


def _lab_configs(n: int) -> list:
    from virtual_lab.lab import LabDeviceConfig

    return [LabDeviceConfig(f"dev{i:02d}", adb_server=i % 2, tags=("bench",)) for i in range(n)]


def serve_lab(root: Path, n: int, ready: Path) -> int:
    """The child process: a virtual lab of n devices until SIGTERM; writes its devices.yaml path."""
    import threading

    from virtual_lab.lab import VirtualLab

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with VirtualLab(root, _lab_configs(n)) as lab:
        tmp = ready.with_suffix(".tmp")
        tmp.write_text(str(lab.devices_yaml))
        os.replace(tmp, ready)  # the parent never reads half a path
        while not stop.wait(0.5):
            pass
    return 0


@contextmanager
def virtual_inventory(root: Path, n: int, in_process: bool) -> Iterator[Inventory]:
    if in_process:
        from virtual_lab.lab import VirtualLab

        with VirtualLab(root / "vlab", _lab_configs(n)) as lab:
            yield lab.inventory
        return
    ready = root / "lab-ready"
    child = subprocess.Popen([sys.executable, __file__, "--serve-lab", str(n), "--lab-root", str(root / "vlab"),
                              "--ready", str(ready)], env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 300
        while not ready.exists():
            if child.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the virtual lab process did not start (exit {child.poll()})")
            time.sleep(0.2)
        yield load_inventory(Path(ready.read_text()))
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/lab.py")
    ap.add_argument("--devices", default="4,8,16", help="device counts, comma-separated")
    ap.add_argument("--tests", type=int, default=4)
    ap.add_argument("--test-s", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=3, help="nights per row; the median is reported")
    ap.add_argument("--reports", action="store_true", help="also write JUnit/SQLite/HTML in the timed night")
    ap.add_argument("--virtual", action="store_true", help="virtual-lab adb devices instead of local ones")
    ap.add_argument("--lab-in-process", action="store_true", help="run the virtual lab in this process")
    ap.add_argument("--serve-lab", type=int, help=argparse.SUPPRESS)  # the lab's child process
    ap.add_argument("--lab-root", help=argparse.SUPPRESS)
    ap.add_argument("--ready", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_lab:
        return serve_lab(Path(args.lab_root), args.serve_lab, Path(args.ready))
    counts = sorted({int(c) for c in args.devices.split(",")})
    job = sleeping_job(args.tests, args.test_s)
    walls: dict[int, list[float]] = {n: [] for n in [1, *counts]}
    with tempfile.TemporaryDirectory(prefix="bench-lab-") as tmp:
        root = Path(tmp)
        with (virtual_inventory(root, max(counts), args.lab_in_process) if args.virtual
              else _local(root, max(counts))) as inv:
            names = sorted(inv.devices)
            night_time(root, inv, names, job, args.reports)  # warm-up (imports, first connections)
            for _ in range(args.repeat):
                for n in walls:
                    walls[n].append(night_time(root, inv, names[:n], job, args.reports)[0])
    single = statistics.median(walls[1])
    kind = ("virtual adb (lab in this process)" if args.lab_in_process else "virtual adb (lab in its own process)") \
        if args.virtual else "local"
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
