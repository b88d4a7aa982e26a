"""`harness devices` through the installed console script, as a user runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("harness")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "harness.cli", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_devices_lists_resolved_facts() -> None:
    res = run("devices", "--file", str(REPO / "devices.yaml"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "TRANSPORT", "ADDRESS"]
    op13 = next(line for line in lines if line.startswith("oneplus13"))
    assert "SM8750" in op13 and " 69 " in op13 and "v79" in op13 and "8MB" in op13
    emu = next(line for line in lines if line.startswith("sm8650-emu"))
    assert "local" in emu and "HTP emulator" in emu and "SM8650" in emu and " 57 " in emu and "v75" in emu


def test_devices_bad_file_exits_4_with_message(tmp_path: Path) -> None:
    bad = tmp_path / "devices.yaml"
    bad.write_text("devices:\n  - name: phone\n    transport: adb\n    soc: SM8750\n")
    res = run("devices", "--file", str(bad))
    assert res.returncode == 4  # inventory error (harness/lab/exitcodes.py)
    assert res.stdout == ""
    assert "Traceback" not in res.stderr
    assert f"{bad}: device 'phone', key 'serial'" in res.stderr


def _devices_into(stdout: int) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("harness")
    cmd = [exe] if exe else [sys.executable, "-m", "harness.cli"]
    return subprocess.run([*cmd, "devices", "--file", str(REPO / "devices.yaml")], cwd=REPO, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=60)


def test_a_full_disk_or_a_closed_pipe_on_stdout_is_exit_1_not_a_traceback() -> None:
    with open("/dev/full", "w") as full:
        res = _devices_into(full.fileno())
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "output (stdout) could not be written: No space left on device" in res.stderr
    read, write = os.pipe()
    os.close(read)  # `| head -1` after its line: nobody reads the rest
    try:
        res = _devices_into(write)
    finally:
        os.close(write)
    assert res.returncode == 1 and res.stderr == "", res.stderr
