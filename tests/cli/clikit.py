"""Running the `harness` console script as a user does (the installed script, else the module)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def harness(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("harness")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "harness.cli", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "CI": "true"})
