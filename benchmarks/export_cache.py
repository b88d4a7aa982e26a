"""The export stage's speed targets, on the real example (examples/et_qnn/nightly.yaml: a small
ExecuTorch decoder lowered with the host QNN for 3 SoCs x 2 formats). Run by hand:

    python benchmarks/export_cache.py [--plan examples/et_qnn/nightly.yaml] [--night DEVICES_YAML]

1. the stage with an empty export cache (every export built);
2. the same stage again: every export a cache hit; target: its wall time <= 5 % of the first's;
3. Ctrl-C (SIGINT) while a lowering runs: target: exit 2 within 2 s, no export process left, no
   build folder left in the cache, nothing at a final path.
Without --night the stage runs through `harness export`; with it, through `harness lab run` on
that inventory (the whole night: its wall time includes the suites, the stage's is read from
the `exports:` lines). Needs `pip install -e '.[qnn]'`.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def harness(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], env=env, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def stage_args(plan: Path, out: Path, night: Path | None, extra: tuple[str, ...] = ()) -> list[str]:
    if night is None:
        return ["export", "--plan", str(plan), "--out", str(out), *extra]
    return ["--file", str(night), "lab", "run", "--plan", str(plan), "--out", str(out), *extra]


def timed(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    t0 = time.monotonic()
    proc = harness(args, env)
    out, _ = proc.communicate()
    return time.monotonic() - t0, proc.returncode, out


def stage_seconds(output: str, wall: float) -> float:
    """The stage's own time, as its last line says it (`exports: done in S s`), in a night too."""
    m = re.search(r"exports: done in ([0-9.]+) s", output)
    return float(m.group(1)) if m else wall


def _stat(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def export_groups(harness_pid: int) -> set[int]:
    """The process groups of the harness's export commands: its children that lead their own."""
    out = set()
    for d in Path("/proc").iterdir():
        st = _stat(d.name) if d.name.isdigit() else []
        if st and int(st[1]) == harness_pid and int(st[2]) == int(d.name):
            out.add(int(d.name))
    return out


def in_groups(groups: set[int]) -> list[int]:
    """Live processes (not zombies) in any of `groups`."""
    found = []
    for d in Path("/proc").iterdir():
        st = _stat(d.name) if d.name.isdigit() else []
        if st and st[0] != "Z" and int(st[2]) in groups:
            found.append(int(d.name))
    return found


def interrupt(plan: Path, work: Path, env: dict[str, str], night: Path | None) -> None:
    env = dict(env, HARNESS_CACHE_DIR=str(work / "cache-stop"))
    out = work / "out-stop"
    proc = harness(stage_args(plan, out, night), env)
    deadline = time.monotonic() + 120
    while not export_groups(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(8)  # well inside the lowerings (torch imported, QNN at work)
    groups = export_groups(proc.pid)
    running = in_groups(groups)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate()
    took = time.monotonic() - t0
    left = in_groups(groups)
    builds = [p for p in (work / "cache-stop" / "exports" / "tmp").glob("*") if p.is_dir()]
    finals = list((work / "cache-stop" / "exports" / "entries").glob("*"))
    print(f"Ctrl-C during {len(groups)} lowerings ({len(running)} processes): exit {proc.returncode} in {took:.2f} s "
          f"(target: 2 within 2 s); export processes left: {len(left)}; build folders left: {len(builds)}; "
          f"entries at final paths: {len(finals)}")
    ok = proc.returncode == 2 and took <= 2.0 and not left and not builds and not finals
    print("  ", "OK" if ok else "MISSED", output.strip().splitlines()[-1] if output.strip() else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", type=Path, default=REPO / "examples" / "et_qnn" / "nightly.yaml")
    ap.add_argument("--night", type=Path, default=None, help="run the whole night on this devices.yaml")
    ap.add_argument("--skip-interrupt", action="store_true")
    ap.add_argument("--interrupt-only", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="export-cache-bench-"))
    env = dict(os.environ, HARNESS_CACHE_DIR=str(work / "cache"),
               PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    if args.interrupt_only:
        interrupt(args.plan, work, env, args.night)
        return 0
    first, rc1, out1 = timed(stage_args(args.plan, work / "out1", args.night), env)
    second, rc2, out2 = timed(stage_args(args.plan, work / "out2", args.night), env)
    hits = out2.count("cache hit") + out2.count("(cached:")
    s1, s2 = stage_seconds(out1, first), stage_seconds(out2, second)
    last1, last2 = (o.strip().splitlines()[-1] if o.strip() else "" for o in (out1, out2))
    print(f"first run: exit {rc1}, {first:.1f} s wall (stage {s1:.1f} s): {last1}")
    print(f"second run: exit {rc2}, {second:.1f} s wall (stage {s2:.2f} s), {hits} cache hits: {last2}")
    print(f"stage, second / first: {100 * s2 / s1:.2f} % (target <= 5 %); whole command: {100 * second / first:.2f} %")
    for line in out1.splitlines():
        if "export" in line and ("FAILED" in line or "passed" in line or "export failed" in line):
            print("   ", line[:300])
    if not args.skip_interrupt:
        interrupt(args.plan, work, env, args.night)
    print(f"(work folder {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
