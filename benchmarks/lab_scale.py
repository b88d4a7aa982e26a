"""Does a lab's size stay bounded by the worker pool, not the device count? (issue 36, fault 12)

    python benchmarks/lab_scale.py [--devices 1000,10000] [--run-s 3] [--status-s 10] [--workers N]
                                   [--stops 5] [--export-checks] [--suite qwen3] [--no-status]

For each device count, a generated devices.yaml of local-transport devices (the host, one work
folder each; a test is a real `sleep 0.2` on the "device"), and in a process of its own:
- a night, `--stops` times: runs `--run-s` seconds, then gets SIGINT (Ctrl-C); printed: the
  stop's latency (signal to the process's exit, claims released and JUnit/HTML/night.json
  written) as min/median/max, split into the night's own part (signal until `run_night`
  returned) and the interpreter's exit after it; reading devices.yaml; the devices worked
  before the stop, peak threads and peak RSS (the largest over the runs);
- `harness lab status`: the health probes of every device within one `--status-s` deadline;
  printed: its wall time, devices probed, peak threads and peak RSS; then once more, stopped by
  SIGINT 1 s into its probes: how long it takes to end.
With `--export-checks` the night's job also has the suite's device-less checks (decided once
before any claim, harness/lab/export_checks.py; on the benchmark's empty export they fail, so
each failing check's record is in the night); `--suite qwen3` has two such checks. Printed
besides: the output folder's size (records.jsonl, junit.xml, all of it) after the stop.
Targets: threads about the pool's size plus a handful whatever the device count; a stop under
2 s at 1 000 devices; status within its deadline plus a second; reports linear in devices.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.inventory import load_inventory  # noqa: E402
from harness.lab import DeviceContext, run_night  # noqa: E402
from harness.lab.plan import load_plan  # noqa: E402
from harness.report import TestRecord  # noqa: E402


def write_lab(root: Path, n: int, workers: int | None, suite: str = "bench") -> tuple[Path, Path]:
    devices = [{"name": f"dev{i}", "transport": "local", "soc": "SM8750", "htp": "emulator",
                "work_dir": str(root / "work" / f"dev{i}"), "tags": ["bench"]} for i in range(n)]
    inv = root / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": devices}))
    (root / "export").mkdir(exist_ok=True)
    plan: dict = {"name": "scale", "tags": ["bench"], "models": {"m": {"path": "export"}},
                  "suites": [{"name": suite, "models": ["m"], "backends": ["cpu"]}],
                  "health": {"min_free_mb": 1}, "locks": {"dir": "locks", "wait_s": 5},
                  "options": {"runtime_dir": "export"}}
    if workers:
        plan["concurrency"] = {"workers": workers}
    path = root / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return inv, path


class Peaks:
    """Samples the process's thread count every 10 ms on a thread of its own."""

    def __init__(self) -> None:
        self.threads = 0
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.threads = max(self.threads, threading.active_count() - 1)  # not counting the sampler

    def report(self, **more: object) -> None:
        self._stop.set()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"peak_threads": self.threads, "peak_rss_mb": round(rss_mb, 1), **more}), flush=True)


class SleepJob:
    """A test is a real `sleep 0.2` on the "device"; with `checks`, the suite's device-less
    checks too (the night decides them before any claim, as for a real suite)."""

    def __init__(self, checks: bool) -> None:
        if checks:
            self.export_checks = self._export_checks

    def __call__(self, ctx: DeviceContext):
        res = ctx.transport.shell(["sleep", "0.2"], timeout=60)
        yield TestRecord(name="sleep", suite=ctx.entry.suite.name, device=ctx.device.name, duration_s=res.duration_s)

    @staticmethod
    def _export_checks(plan, devices, run_id):
        from harness.lab.export_checks import decide_export_checks

        return decide_export_checks(plan, devices, run_id=run_id)


def _size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()] if path.exists() else []
    return round(sum(p.stat().st_size for p in files) / 1e6, 2)


def child_night(root: Path, checks: bool) -> int:
    peaks = Peaks()
    t0 = time.monotonic()
    inv = load_inventory(root / "devices.yaml")
    load_s = time.monotonic() - t0
    plan = load_plan(root / "plan.yaml")
    job = SleepJob(checks)

    (root / "ready").write_text("1")
    say = (lambda m: print(f"{time.monotonic():.2f} {m}", file=sys.stderr, flush=True)) if os.environ.get(
        "LAB_SCALE_SAY") else (lambda m: None)
    night = run_night(plan, inv, root / "out", job, say=say, history_db=root / "history.sqlite")
    returned_at = time.monotonic()  # CLOCK_MONOTONIC: the parent's clock too
    say("run_night returned")
    worked = sum(1 for o in night.devices.values() if o.records)
    out = root / "out"
    peaks.report(devices=len(inv.devices), worked=worked, interrupted=night.interrupted,
                 reports=sorted(night.reports), returned_at=returned_at, load_s=round(load_s, 2),
                 records_mb=_size_mb(out / "records.jsonl"), junit_mb=_size_mb(out / "junit.xml"),
                 out_mb=_size_mb(out), records=len(night.records()))
    return 2 if night.interrupted else 0


def child_status(root: Path, deadline_s: float, workers: int | None) -> int:
    from harness.lab import collect_status

    peaks = Peaks()
    inv = load_inventory(root / "devices.yaml")
    t0 = time.monotonic()
    (root / "status-ready").write_text("1")
    try:
        statuses = collect_status(inv, root / "locks", timeout_s=deadline_s, workers=workers)
    except KeyboardInterrupt:  # the stop run: how long Ctrl-C takes is measured by the parent
        peaks.report(devices=len(inv.devices), interrupted=True)
        return 2
    wall = time.monotonic() - t0
    peaks.report(devices=len(inv.devices), status_wall_s=round(wall, 2),
                 probed=sum(1 for s in statuses if s.health is not None))
    return 0


def run_child(args: list[str], env: dict[str, str], signal_after: tuple[Path, float] | None) -> tuple[dict, float]:
    """The child's JSON line and, with `signal_after`, the seconds from its SIGINT to its exit
    (the JSON then also has `signal_to_return_s`: the part before `run_night` returned)."""
    child = subprocess.Popen([sys.executable, __file__, *args], env=env, stdout=subprocess.PIPE, text=True)
    latency, sent = 0.0, 0.0
    if signal_after is not None:
        ready, wait_s = signal_after
        ready.unlink(missing_ok=True)
        while not ready.exists() and child.poll() is None:
            time.sleep(0.05)
        time.sleep(wait_s)
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=600)
        latency = time.monotonic() - sent
    else:
        out, _ = child.communicate(timeout=600)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"benchmark child {args} printed no result (exit {child.returncode})")
    result = json.loads(lines[-1])
    if "returned_at" in result and sent:
        result["signal_to_return_s"] = result["returned_at"] - sent
    return result, latency


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}/{statistics.median(values):.2f}/{max(values):.2f}"


def bench_nights(root: Path, n: int, args: argparse.Namespace, env: dict[str, str]) -> None:
    """`--stops` stopped nights on one lab: the stop's latency, its parts, threads and memory."""
    stops, parts, loads, nights = [], [], [], []
    for _ in range(args.stops):
        shutil.rmtree(root / "out", ignore_errors=True)
        night, stop_s = run_child(["--child", "night", "--root", str(root), *(["--export-checks"] if args.export_checks
                                                                                else [])],
                                  env, (root / "ready", args.run_s))
        stops.append(stop_s)
        parts.append(night["signal_to_return_s"])
        loads.append(night["load_s"])
        nights.append(night)
    exits = [s - p for s, p in zip(stops, parts, strict=True)]
    worst = max(nights, key=lambda x: x["peak_threads"])
    print(f"{n:>8} {'night':<7} {worst['peak_threads']:>8} {max(x['peak_rss_mb'] for x in nights):>7}  "
          f"stop {_spread(stops)} s (min/median/max of {len(stops)}) after SIGINT at {args.run_s:.0f} s: "
          f"{_spread(parts)} until run_night returned, {_spread(exits)} the exit; "
          f"devices.yaml read in {_spread(loads)} s; output {max(x['out_mb'] for x in nights)} MB "
          f"(records.jsonl {max(x['records_mb'] for x in nights)} MB, junit.xml {max(x['junit_mb'] for x in nights)} MB, "
          f"{max(x['records'] for x in nights)} records); {min(x['worked'] for x in nights)}-"
          f"{max(x['worked'] for x in nights)} devices worked; reports: "
          f"{', '.join(r for r in nights[-1]['reports'] if ':' not in r) or 'none'}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", default="1000,10000")
    ap.add_argument("--run-s", type=float, default=3.0, help="seconds a night runs before its Ctrl-C")
    ap.add_argument("--status-s", type=float, default=10.0, help="lab status's deadline")
    ap.add_argument("--workers", type=int, default=None, help="the plan's concurrency.workers (default: its default)")
    ap.add_argument("--stops", type=int, default=5, help="stopped nights per device count (min/median/max)")
    ap.add_argument("--export-checks", action="store_true", help="the job has the suite's device-less checks")
    ap.add_argument("--suite", default="bench", help="the plan's suite (qwen3: two device-less checks)")
    ap.add_argument("--no-status", action="store_true", help="nights only, no `lab status` runs")
    ap.add_argument("--child", choices=["night", "status"], help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "night":
        return child_night(args.root, args.export_checks)
    if args.child == "status":
        return child_status(args.root, args.status_s, args.workers)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"{'devices':>8} {'what':<7} {'threads':>8} {'rss MB':>7}  result")
    for n in (int(x) for x in args.devices.split(",")):
        with tempfile.TemporaryDirectory(prefix="lab-scale-") as tmp:
            root = Path(tmp)
            write_lab(root, n, args.workers, args.suite)
            bench_nights(root, n, args, env)
            if args.no_status:
                continue
            extra = ["--workers", str(args.workers)] if args.workers else []
            status, _ = run_child(["--child", "status", "--root", str(root), "--status-s", str(args.status_s),
                                   *extra], env, None)
            print(f"{n:>8} {'status':<7} {status['peak_threads']:>8} {status['peak_rss_mb']:>7}  "
                  f"{status['status_wall_s']:.2f} s (deadline {args.status_s:.0f} s), "
                  f"{status['probed']} devices probed", flush=True)
            stopped, stop_s = run_child(["--child", "status", "--root", str(root), "--status-s", "600", *extra], env,
                                        (root / "status-ready", 1.0))
            print(f"{n:>8} {'status':<7} {stopped['peak_threads']:>8} {stopped['peak_rss_mb']:>7}  "
                  f"stop {stop_s:.2f} s after SIGINT 1 s into the probes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
