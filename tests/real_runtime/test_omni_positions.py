"""MNN's REAL Omni vision runtime (../shared/runtimes/mnn-omni-x86_64, four libllm.so variants)
on the real tiny Qwen3-VL export: the positions check and the suite judge each variant right.

- llm_demo itself, the prompt of docs/posdbg.md#what-the-real-engine-showed, one chunk,
  [128, 1], [140, 1], [64, 1]: the verdicts of the captured fixtures
  (tests/checks/test_mrope_real_captures.py), live.
- `MNN_POSDBG=full pytest suites/qwen3_vl --device host -k "mrope or shape"`: V2 and V3 pass
  wherever no chunk boundary falls inside an image and name row_inflation where one does; V1
  fails naming chunk and row; V0 fails with the DeepStack broadcast as a shape failure. The
  same on a virtual adb phone running the real binary (CPU pairs real).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from harness.checks import mrope
from harness.runners import write_test_image
from tests.checks.test_mrope_real_captures import CAPTURES, EXPECTED

pytestmark = pytest.mark.slow  # tens of seconds: tests/conftest.py starts slow files early

REPO = Path(__file__).resolve().parents[2]
OMNI = REPO.parent / "shared" / "runtimes" / "mnn-omni-x86_64"
TINY = REPO.parent / "shared" / "models" / "qwen3-vl-tiny-random"
VARIANTS = ("V0", "V1", "V2", "V3")
SHARED_FILES = ("llm_demo", "libMNN.so", "libMNN_Express.so", "libMNNOpenCV.so", "libMNNAudio.so",
                "llm_logits_diff", "llm_logits_diff_vl")


@pytest.fixture(scope="module")
def omni() -> Path:
    for path in (OMNI / "llm_demo", OMNI / "variants" / "V3" / "libllm.so", TINY / "config.json"):
        if not path.exists():
            pytest.skip(f"{path} is absent: these tests run MNN's real Omni runtime and the tiny Qwen3-VL "
                        "export from ../shared")
    if platform.machine() != "x86_64":
        pytest.skip(f"the shared Omni runtime is built for x86_64; this host is {platform.machine()}")
    return OMNI


def runtime_folder(dst: Path, variant: str) -> Path:
    """A runtime folder with one variant's libllm.so beside the shared programs (symlinks)."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in SHARED_FILES:
        (dst / name).symlink_to(OMNI / name)
    (dst / "libllm.so").symlink_to(OMNI / "variants" / variant / "libllm.so")
    return dst


def _llm_demo(tmp: Path, variant: str, chunk: str) -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((TINY / "config.json").read_text())
    cfg.update(base_dir=str(TINY) + "/", sampler_type="greedy", max_new_tokens=8)
    if chunk != "one":
        cfg["chunk_limits"] = [int(chunk), 1]
    (tmp / "config.json").write_text(json.dumps(cfg))
    image = write_test_image(tmp / "tall.png", 448, 224)
    line = (CAPTURES / "prompt-448x224.txt").read_text().strip()
    head, _, rest = line.partition("<img>")
    tail = rest.partition("</img>")[2]
    (tmp / "prompt.txt").write_text(f"{head}<img><hw>448, 224</hw>{image}</img>{tail}\n")
    env = {**os.environ, "MNN_POSDBG": "full",
           "LD_LIBRARY_PATH": f"{OMNI / 'variants' / variant}:{OMNI}"}
    proc = subprocess.run([str(OMNI / "llm_demo"), "config.json", "prompt.txt", "8"], cwd=tmp, env=env,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return proc.stdout.decode("utf-8", errors="replace")


@pytest.mark.parametrize("chunk", ["one", "128", "140", "64"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_live_llm_demo_matches_the_captured_verdict(omni: Path, tmp_path: Path, variant: str, chunk: str) -> None:
    text = _llm_demo(tmp_path, variant, chunk)
    verdict = mrope.judge_log(text)
    want, kinds = EXPECTED[f"{variant}-chunk-{chunk}.full"]
    assert (verdict.verdict, [f.kind for f in verdict.findings]) == (want, kinds), verdict.explain()
    assert verdict.warmup_lines == 7 and "listSize=281" in text


def _suite(devices: Path, device: str, runtime: Path, records: Path) -> dict[str, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "qwen3_vl"), "-p", "no:cacheprovider", "-q",
         "--device", device, "--devices-file", str(devices), "--model-dir", str(TINY), "--runtime-dir", str(runtime),
         "-k", "mrope or shape", f"--harness-records={records}", "-o", "log_cli=false"],
        cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "MNN_POSDBG": "full"})
    out = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), out  # tests pass or fail; nothing errors
    assert " error" not in out.splitlines()[-1], out
    return {json.loads(line)["name"].split("::", 1)[1]: json.loads(line) for line in records.read_text().splitlines()}


def _status(recs: dict[str, dict], name: str) -> str:
    return recs[name]["status"]


def _check_variant(recs: dict[str, dict], variant: str) -> None:
    # One chunk (the matrix's CPU pair): right on every variant, warm-up lines are no prompt.
    assert _status(recs, "test_mrope_positions[cpu/cpu]") == "passed", recs["test_mrope_positions[cpu/cpu]"]
    assert _status(recs, "test_export_shapes") == "passed"
    split = recs["test_mrope_positions_image_split"]
    assert split["status"] == "failed" and "[row_inflation]" in split["message"], split
    chunked, shapes = recs["test_mrope_positions_chunked"], recs["test_runtime_shape_guards_chunked"]
    if variant in ("V2", "V3"):
        assert chunked["status"] == "passed", chunked
    else:
        assert chunked["status"] == "failed" and "[chunk_local_bug]" in chunked["message"], chunked
        assert "prefill chunk 1" in chunked["message"] and "row 0 of the call" in chunked["message"]
    if variant == "V0":  # the padded block fails on the DeepStack add: a shape failure
        assert shapes["status"] == "failed" and shapes["failure_class"] == "shape-error", shapes
        assert "compiled (chunk_limits [128, 1], padded)" in shapes["message"] and "Broad cast error" in shapes["message"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_suite_on_the_host_judges_each_variant(omni: Path, tmp_path: Path, variant: str) -> None:
    devices = tmp_path / "devices.yaml"
    devices.write_text(json.dumps({"devices": [{"name": "host", "transport": "local",
                                                "work_dir": str(tmp_path / "work")}]}))
    recs = _suite(devices, "host", runtime_folder(tmp_path / "rt", variant), tmp_path / "records.jsonl")
    _check_variant(recs, variant)


@pytest.mark.parametrize("variant", ["V1", "V3"])
def test_suite_on_a_virtual_phone_judges_the_real_binary(omni: Path, vlab_factory, tmp_path: Path,
                                                        variant: str) -> None:
    vlab = vlab_factory()
    recs = _suite(vlab.devices_yaml, "oneplus13", runtime_folder(tmp_path / "rt", variant), tmp_path / "records.jsonl")
    _check_variant(recs, variant)
    # The QNN pairs are the virtual phone's, not judged here: no QNN config in this CPU export.
    assert _status(recs, "test_mrope_positions[qnn/qnn]") == "skipped"
