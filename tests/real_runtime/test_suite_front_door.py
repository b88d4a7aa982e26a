"""The device suites as a user runs them: `--backends cpu` with a runtime that has no QNN
library (QNN cells SKIPPED with the reason, not ERROR), a QNN selection without the libraries
(one error naming --qnn-sdk), records carrying status, class, verdict and their own duration,
and a suite skipping an export of another model type cleanly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.real_runtime.realrt import REAL_EXPORT, real_runtime_or_skip

REPO = Path(__file__).resolve().parents[2]
GARBLED = "the cat the cat the cat the cat the cat the cat the cat the cat the cat the cat the cat the cat"


def run_suite(suite: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", str(REPO / "suites" / suite), "-p", "no:cacheprovider",
                           "-q", "-rs", *args], cwd=REPO, capture_output=True, text=True, timeout=900)


def _records(path: Path) -> dict[str, dict]:
    return {json.loads(line)["name"].split("::", 1)[1]: json.loads(line) for line in path.read_text().splitlines()}


def test_cpu_only_selection_skips_qnn_cells_and_records_every_outcome(vlab_factory, tmp_path: Path) -> None:
    from virtual_lab.exports import default_behaviour, make_qwen3_export
    from virtual_lab.runtime import make_runtime_dir

    vlab = vlab_factory()
    behaviour = default_behaviour(False)
    behaviour["prompts"]["Describe a cat"] = {"*": {"text": GARBLED}}
    export = make_qwen3_export(tmp_path / "qwen3", size_mb=1, behaviour=behaviour).path
    runtime = make_runtime_dir(tmp_path / "rt", "v79", with_qnn_libs=False)  # no QNN library at all
    records = tmp_path / "records.jsonl"
    common = ["--device", "oneplus13", "--devices-file", str(vlab.devices_yaml), "--model-dir", str(export),
              "--runtime-dir", str(runtime)]
    proc = run_suite("qwen3", *common, "--backends", "cpu", f"--harness-records={records}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # the garbled cat fails; nothing errors
    assert " error" not in out.splitlines()[-1], out
    assert "SKIPPED [2]" in out and "backend qnn not selected (--backends cpu)" in out
    recs = _records(records)
    cat = recs["test_generation[cpu-cat]"]
    assert cat["status"] == "failed" and cat["failure_class"] == "garbled" and cat["verdict"] not in ("", "coherent")
    france = recs["test_generation[cpu-france]"]
    assert france["status"] == "passed" and france["verdict"] == "coherent" and france["duration_s"] > 0
    skipped = recs["test_generation[qnn-france]"]
    assert skipped["status"] == "skipped" and "not selected" in skipped["message"]
    # Its own duration: a skip takes no time, whatever the session's matrix took.
    assert skipped["duration_s"] < 1.0

    # Selecting the QNN pair without its libraries: one clear error naming the option, once.
    again = run_suite("qwen3", *common, "--backends", "qnn,cpu")
    text = again.stdout + again.stderr
    assert again.returncode == 4, text  # an input error (harness/lab/exitcodes.py)
    assert "--qnn-sdk" in text and text.count("libQnnHtpV79Skel.so") == 1, text


def test_suite_skips_an_export_of_another_model_type_on_the_host(tmp_path: Path) -> None:
    real_runtime_or_skip()
    devices = tmp_path / "devices.yaml"
    devices.write_text(yaml.safe_dump({"devices": [{"name": "host", "transport": "local",
                                                    "work_dir": str(tmp_path / "work")}]}))
    proc = run_suite("qwen3", "--device", "host", "--devices-file", str(devices), "--model-dir", str(REAL_EXPORT),
                     "--runtime-dir", str(REAL_EXPORT.parent.parent / "runtimes" / "mnn-x86_64"), "-k", "generation")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "model type is 'llama' (llm_config.json), not qwen3" in out and "error" not in out.splitlines()[-1]
