"""`harness bisect --axis runtime` over MNN's four real Omni builds (V0..V3, ../shared) on the host:
the VL suite's chunked-positions finding (chunk_local_bug on V0 and V1) goes away at V2, which the
bisection names as the first new version (git bisect's old = fails, new = passes)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import pytest

from harness.cli import main
from tests.real_runtime.test_omni_positions import SHARED_FILES, VARIANTS
from tests.shared import SHARED

OMNI = SHARED / "runtimes" / "mnn-omni-x86_64"
TINY = SHARED / "models" / "qwen3-vl-tiny-random"


def runtime_folder(dst: Path, variant: str) -> Path:
    """One variant's runtime folder: links to the shared programs and its libllm.so (read only)."""
    dst.mkdir(parents=True)
    for name in SHARED_FILES:
        (dst / name).symlink_to(OMNI / name)
    (dst / "libllm.so").symlink_to(OMNI / "variants" / variant / "libllm.so")
    return dst

pytestmark = pytest.mark.slow


def test_bisect_names_the_build_that_fixed_the_positions(tmp_path, capsys, monkeypatch):
    for path in (OMNI / "llm_demo", OMNI / "variants" / "V3" / "libllm.so", TINY / "config.json"):
        if not path.exists():
            pytest.skip(f"{path} is absent: this test bisects MNN's real Omni builds from ../shared")
    if platform.machine() != "x86_64":
        pytest.skip(f"the shared Omni runtime is built for x86_64; this host is {platform.machine()}")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MNN_POSDBG", "full")
    folders = [runtime_folder(tmp_path / "rt" / v, v) for v in VARIANTS]
    devices = tmp_path / "devices.yaml"
    devices.write_text(json.dumps({"devices": [{"name": "host", "transport": "local",
                                                "work_dir": str(tmp_path / "work")}]}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({
        "name": "vl", "devices": ["host"], "models": {"vl": {"path": str(TINY)}},
        "suites": [{"name": "qwen3_vl", "runner": "llm_demo", "models": ["vl"], "backends": ["cpu/cpu"]}],
        "options": {"runtime_dir": str(folders[-1]), "max_new_tokens": 8, "timeout_s": 300,
                    "env": {"MNN_POSDBG": "full"}}}))
    code = main(["--file", str(devices), "bisect", "--plan", str(plan), "--device", "host", "--axis", "runtime",
                 "--testcase", "test_mrope_positions_chunked", "--versions", *map(str, folders),
                 "--bad", "V0", "--good", "V3", "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    result = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert result["first_new_version"] == "V2" and result["fixes"], result
    steps = {s["version"]: s for s in result["steps"]}
    assert steps["V1"]["mark"] == "old" and "chunk_local_bug" in steps["V1"]["message"], steps
    assert steps["V2"]["status"] == "passed"
    assert "V2 is the first new version (fixes it" in out.out
    assert os.path.isfile(tmp_path / "out" / "junit.xml")
