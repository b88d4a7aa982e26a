"""`python -m harness` is the `harness` console script, for an environment whose scripts folder is
not on PATH (a venv used by path): same parser, same exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_python_m_harness_is_the_console_script(tmp_path: Path) -> None:
    ok = subprocess.run([sys.executable, "-m", "harness", "--help"], cwd=tmp_path, capture_output=True,
                        text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("usage: harness"), ok.stdout
    missing = tmp_path / "nowhere.yaml"
    bad = subprocess.run([sys.executable, "-m", "harness", "--file", str(missing), "devices"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 4, (bad.returncode, bad.stderr)  # README: usage/inventory error
    assert "nowhere.yaml" in bad.stderr and "Traceback" not in bad.stderr
