"""suites/qwen3_vl's static shape test on exports made like the real ones (an NPU stub, no
sidecar): it fails a stub whose deepstack_embeds is the [3,1,1] placeholder and passes a
correct one. The suite runs as users run it (pytest with --device/--model-dir); the static test
touches no device, so a local device entry is enough."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from virtual_lab.exports import MANIFEST_PATH, make_qwen3_vl_export

REPO = Path(__file__).resolve().parents[2]


def _run_static_test(model_dir: Path, work: Path) -> subprocess.CompletedProcess:
    devices = work / "devices.yaml"
    devices.write_text(f"devices:\n  - name: bench\n    transport: local\n    soc: SM8750\n    htp: emulator\n"
                       f"    work_dir: {work / 'device'}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "suites/qwen3_vl/test_qwen3_vl.py::test_export_shapes", "-q",
         "-p", "no:cacheprovider", "--device", "bench", "--devices-file", str(devices),
         "--model-dir", str(model_dir)],
        cwd=REPO, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("placeholder", [True, False], ids=["deepstack-3-1-1", "correct"])
def test_static_shapes_on_a_stub_without_sidecar(tmp_path: Path, placeholder: bool) -> None:
    info = make_qwen3_vl_export(tmp_path / "Qwen3-VL-2B-Instruct-MNN", size_mb=0.5, sidecar=False,
                                deepstack_placeholder=placeholder, n_llm_graphs=6)
    assert not (info.path / MANIFEST_PATH).exists()
    proc = _run_static_test(info.path, tmp_path)
    out = proc.stdout + proc.stderr
    if placeholder:
        assert proc.returncode == 1, out
        assert "1 failed" in out
        assert "[deepstack_placeholder] qnn/llm.mnn" in out and "found [3,1,1]" in out
        assert "(from stub)" in out or "(from libQnnSystem)" in out  # the stub, its binaries re-read by QNN
    else:
        assert proc.returncode == 0, out
        assert "1 passed" in out
