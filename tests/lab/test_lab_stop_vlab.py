"""Ctrl-C and SIGTERM stop a night on the virtual lab, through the `harness` console script,
wherever the night is: while an llm_demo runs (one that would run for ten minutes) and while
a push is under way (a slow link). Each night must end (a generous limit: speed targets live
in benchmarks/) with exit 2, no device process of the run left, no next prompt's llm_demo
started after the stop, no claim left, and nothing partial at a final path on the device."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from test_lab_exitcodes_vlab import DEVICE, Lab, _no_claim_left

from harness.lab import ExitCode

pytestmark = pytest.mark.slow

WORK = "/data/local/tmp/harness"
STARTS = "/data/local/tmp/llm-demo-starts.txt"  # every llm_demo start appends its pid (host pid: shared)


class StopLab(Lab):
    def __init__(self, root: Path):
        super().__init__(root)
        from virtual_lab.exports import make_qwen3_export

        self.phone = self.vlab.adb_device(DEVICE)
        self.hang_runtime = root / "hang-runtime"
        self.hang_runtime.mkdir()
        for src in self.slow_runtime.iterdir():  # same files, the llm_demo hangs after noting its start
            (self.hang_runtime / src.name).write_bytes(src.read_bytes())
            (self.hang_runtime / src.name).chmod(src.stat().st_mode)
        launcher = (self.runtime / "llm_demo").read_text().splitlines(keepends=True)
        (self.hang_runtime / "llm_demo").write_text(
            launcher[0] + f"import os, time; open({STARTS!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(600)\n"
            + "".join(launcher[1:]))
        self.exports["big"] = make_qwen3_export(root / "exports" / "big", size_mb=48).path

    def starts(self) -> list[int]:
        path = self.phone.host_path(STARTS)
        return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = StopLab(tmp_path_factory.mktemp("stop"))
    yield lab
    lab.vlab.stop()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _wait(what: str, ok, proc, limit: float = 300) -> None:
    end = time.monotonic() + limit
    while not ok():
        assert proc.poll() is None, f"the night ended before {what}: {proc.communicate()}"
        assert time.monotonic() < end, f"never saw {what}"
        time.sleep(0.05)


def _stopped_cleanly(lab: StopLab, proc, out: str) -> tuple[str, str]:
    stdout, stderr = proc.communicate(timeout=240)  # ended: a generous limit, not a speed target
    assert proc.returncode == ExitCode.INTERRUPTED, stdout + stderr
    assert "Traceback" not in stderr and "still busy" not in stderr, stderr
    meta = json.loads((lab.root / out / "night.json").read_text())
    assert meta["interrupted"]
    _no_claim_left(lab)
    pid_files = [p.name for p in lab.phone.host_path(f"{WORK}/.harness").glob("pid-*")]
    assert pid_files == [], pid_files  # every timed command's record went with its program
    return stdout, stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_while_llm_demo_runs_kills_it_and_starts_no_other(lab, signum):
    out = f"hang-{signum}"
    before = len(lab.starts())
    plan = lab.plan(out, options={"runtime_dir": str(lab.hang_runtime), "qnn_sdk": str(lab.vlab.qnn_sdk_dir),
                                  "max_new_tokens": 16, "timeout_s": 900})
    proc = lab.harness("lab", "run", "--plan", str(plan), "--out", str(lab.root / out))
    _wait("an llm_demo start", lambda: len(lab.starts()) > before, proc)
    running = lab.starts()[before:]
    assert len(running) == 1 and _alive(running[0])
    proc.send_signal(signum)
    _stopped_cleanly(lab, proc, out)
    assert lab.starts()[before:] == running, "an llm_demo was started after the stop"
    assert not _alive(running[0]), "the run's llm_demo outlived the night"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_during_a_push_ends_it_between_chunks(lab, signum):
    out = f"push-{signum}"
    big = lab.exports["big"]
    sizes = {p.relative_to(big).as_posix(): p.stat().st_size for p in big.rglob("*") if p.is_file()}
    incoming = lab.phone.host_path(f"{WORK}/.incoming")
    final = lab.phone.host_path(f"{WORK}/models/{big.name}")
    old_runs = set(incoming.iterdir()) if incoming.exists() else set()

    def sent() -> int:  # bytes this night's push left under .incoming
        runs = [d for d in incoming.iterdir() if d not in old_runs] if incoming.exists() else []
        return sum(f.stat().st_size for d in runs for f in d.rglob("*") if f.is_file())

    lab.phone.faults.slow_link(4 << 20)  # 4 MiB/s: the export takes over 10 s to push
    try:
        proc = lab.harness("lab", "run", "--plan", str(lab.plan(out, export="big")), "--out", str(lab.root / out))
        _wait("the push under way", lambda: sent() > (2 << 20), proc)
        proc.send_signal(signum)
        _stopped_cleanly(lab, proc, out)
    finally:
        lab.phone.faults.slow_link(None)
    assert sent() < sum(sizes.values()), "the push ran on to the end after the stop"
    # Nothing partial at a final path: what is there is whole (placed only once verified).
    placed = {p.relative_to(final).as_posix(): p.stat().st_size for p in final.rglob("*") if p.is_file()} \
        if final.exists() else {}
    assert all(sizes.get(rel) == size for rel, size in placed.items() if rel in sizes), placed
