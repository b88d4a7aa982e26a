"""The real debug lowering the localization tests share (tests/conftest.py `localize_debug_export`):
the example exporter's debug build of a 2-layer SwiGLU decoder (SM8650, 16a8w), once per session."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def host_env() -> dict[str, str]:
    """The host's QAIRT on a child's loader path and this checkout on its PYTHONPATH; skips without the qnn extra."""
    for module in ("executorch", "onnxruntime_qnn"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the qnn extra is not installed ({module} missing): pip install 'harness[qnn]'")
    from harness.qnn import QnnUnavailable, find_host_qnn

    try:
        host = find_host_qnn()
    except QnnUnavailable as exc:
        pytest.skip(str(exc))
    env = host.child_env(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def lower_debug_program(out: Path, *extra: str) -> Path:
    """One real debug lowering (~30-90 s on this host) into `out`; `extra`: more exporter arguments
    (e.g. a planted fault)."""
    argv = [sys.executable, str(ROOT / "examples/et_qnn/lower_decoder.py"), "--soc", "SM8650", "--format", "16a8w",
            "--layers", "2", "--mlp", "swiglu", "--out", str(out), "--debug-program", *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, env=host_env(), timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out
