"""`harness localize --device NAME FOLDER` (issue 41.1): its answers before a device is touched. A
folder without a debug build is undecidable (exit 2, one JSON object on stdout under --json); a phone
or a board needs the runtime folder its qnn_executor_runner comes from (a usage error, exit 4). The
runs themselves: tests/runners/test_localize_device.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _harness(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    devices = tmp_path / "devices.yaml"
    devices.write_text(yaml.safe_dump({"devices": [
        {"name": "emu", "transport": "local", "soc": "SM8650", "htp": "emulator", "work_dir": str(tmp_path / "w")},
        {"name": "phone", "transport": "adb", "serial": "R5CX000", "soc": "SM8650", "work_dir": "/data/local/tmp/h"},
    ]}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "harness.cli", "--file", str(devices), "localize", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)


def test_a_folder_without_a_debug_build_is_undecidable(tmp_path: Path) -> None:
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "model.pte").write_bytes(b"a program, no debug build")
    res = _harness(tmp_path, "--device", "emu", "--json", str(tmp_path / "export"))
    answer = json.loads(res.stdout)
    assert res.returncode == 2 and answer["outcome"] == "undecidable", (res.stdout, res.stderr)
    assert "missing debug.pte" in answer["reason"] and "--debug-program" in answer["reason"]


def test_a_phone_needs_its_runtime_folder(tmp_path: Path) -> None:
    res = _harness(tmp_path, "--device", "phone", str(tmp_path))
    assert res.returncode == 4 and "pass --runtime DIR" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
