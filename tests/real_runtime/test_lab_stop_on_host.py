"""Ctrl-C and SIGTERM in a lab night while MNN's real llm_demo runs (the host as a `local`
device, the real SmolLM2 export), through the `harness` console script: the night ends with
exit 2, the llm_demo it was running is killed, none starts after the stop, and no claim or pid
file is left. Ended is checked with a generous limit (speed targets live in benchmarks/)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.lab import ExitCode, lock_state
from tests.real_runtime.realrt import REAL_EXPORT, REPO, make_build_tree, real_runtime_or_skip


def _llm_demos_under(folder: Path) -> set[int]:
    """Live llm_demo processes whose program lies under `folder` (the device's runtime)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                exe = os.readlink(entry / "exe")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if exe.startswith(str(folder)) and exe.endswith("llm_demo") and state != "Z":
                found.add(int(entry.name))
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_while_the_real_llm_demo_runs(tmp_path: Path, signum: int) -> None:
    real_runtime_or_skip()
    tree = make_build_tree(tmp_path / "build")
    work = tmp_path / "work"
    devices = tmp_path / "devices.yaml"
    devices.write_text(yaml.safe_dump({"devices": [{"name": "host", "transport": "local", "work_dir": str(work)}]}))
    plan = tmp_path / "night.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "host-stop", "devices": ["host"], "repeats": 3,
        "models": {"smollm2": {"path": str(REAL_EXPORT)}},
        "suites": [{"name": "matrix", "runner": "llm_demo", "models": ["smollm2"]}],
        "options": {"runtime_dir": str(tree), "max_new_tokens": 256, "timeout_s": 300},
        "health": {"min_free_mb": 16},
    }))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("HARNESS_LOCK_DIR", None)
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "--file", str(devices), "lab", "run", "--plan",
                             str(plan), "--out", str(tmp_path / "out")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runtimes = work / "runtimes"
    deadline = time.monotonic() + 300
    running: set[int] = set()
    while not running:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no llm_demo ever ran"
        running = _llm_demos_under(runtimes)
        time.sleep(0.01)
    proc.send_signal(signum)
    signalled = time.monotonic()
    started_after: set[int] = set()
    while proc.poll() is None and time.monotonic() < signalled + 240:
        started_after |= _llm_demos_under(runtimes) - running
        time.sleep(0.01)
    stdout, stderr = proc.communicate(timeout=60)  # ended (generous limit), then judged
    print(f"signal to exit: {time.monotonic() - signalled:.2f} s")
    assert proc.returncode == ExitCode.INTERRUPTED, stdout + stderr
    assert "Traceback" not in stderr and "still busy" not in stderr, stderr
    assert not started_after, f"llm_demo started after the stop: {started_after}"
    assert not _llm_demos_under(runtimes), "an llm_demo outlived the night"
    state = lock_state(tmp_path / "locks", "host")
    assert not state.held and state.holder is None, state.describe()
    assert not list((work / ".harness").glob("pid-*"))
