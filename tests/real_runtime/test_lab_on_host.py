"""Nights on the host as a `local` device (no soc) with MNN's real llm_demo and the real shipped
SmolLM2 export, through `harness lab run`: the CPU pair runs and is judged without a QNN SDK,
and the static quantization check runs before any device time. The shipped export copies an
operand's range onto every MLP Mul (issue 20): the night exits 1 with a failing
test_quant_metadata naming the blocks; the same export with its quantization metadata fixed
(same weights, built in a temp folder) passes it and answers the same on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from harness.report import read_records
from tests.real_runtime.quantfix import fixed_export
from tests.real_runtime.realrt import REAL_EXPORT, REPO, make_build_tree, real_runtime_or_skip


def _night(tmp: Path, export: Path, tree: Path, name: str) -> tuple[int, str, dict[str, ET.Element], dict]:
    devices = tmp / "devices.yaml"
    if not devices.exists():
        devices.write_text(yaml.safe_dump({"devices": [{"name": "host", "transport": "local",
                                                        "work_dir": str(tmp / "work")}]}))
    plan = tmp / f"{name}.yaml"
    plan.write_text(yaml.safe_dump({
        "name": name, "devices": ["host"],
        "models": {"smollm2": {"path": str(export)}},
        "suites": [{"name": "matrix", "runner": "llm_demo", "models": ["smollm2"]}],
        "options": {"runtime_dir": str(tree), "max_new_tokens": 64, "timeout_s": 300},
        "health": {"min_free_mb": 16}, "locks": {"dir": str(tmp / "locks")},
        "history": {"db": str(tmp / "history.sqlite")},
    }))
    out = tmp / name
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "--file", str(devices), "lab", "run",
                           "--plan", str(plan), "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=1200, env={**os.environ, "PYTHONPATH": str(REPO)})
    cases = {c.get("name", ""): c for c in ET.parse(out / "junit.xml").getroot().iter("testcase")}
    records = {r.name: r for r in read_records(out / "records.jsonl")}
    return proc.returncode, proc.stdout + proc.stderr, cases, records


def test_night_on_the_host_fails_the_shipped_quantization_and_passes_the_fixed_one(tmp_path: Path) -> None:
    real_runtime_or_skip()
    tree = make_build_tree(tmp_path / "build")
    code, out, cases, recs = _night(tmp_path, REAL_EXPORT, tree, "shipped")
    assert code == 1, out
    assert set(cases) == {"test_quant_metadata", "test_generation[cpu-france]", "test_generation[cpu-cat]",
                          "test_generation[qnn-france]", "test_generation[qnn-cat]", "test_export_verdict"}, out
    # The cause, named with its blocks and the fix, decided once before any device time.
    failure = cases["test_quant_metadata"].find("failure")
    assert failure is not None and failure.get("type") == "quant-metadata", out
    quant = recs["test_quant_metadata"]
    assert "MLP Mul range inherited from an operand in 30 of 30 blocks (blocks 0-29)" in quant.message
    assert "/blocks.0/mlp/Mul_output_0" in quant.message and "fix:" in quant.message
    assert "integer tensors quantized" in quant.message
    assert "before any device was claimed" in quant.message and quant.device == "host"
    # The CPU pair ran on the real llm_demo; the QNN pair is skipped on the host with the reason.
    france = recs["test_generation[cpu-france]"]
    assert france.status == "passed" and france.verdict == "coherent" and france.soc_model == "host"
    assert recs["test_generation[cpu-cat]"].failure_class == "garbled" and recs["test_generation[cpu-cat]"].duration_s > 0
    assert recs["test_generation[qnn-france]"].status == "skipped"
    assert "has no config in this export" in recs["test_generation[qnn-france]"].message
    # The export's verdict names its instruments, the cause first.
    verdict = recs["test_export_verdict"]
    assert verdict.status == "failed" and verdict.failure_class == "quant-metadata", verdict.message
    assert verdict.message.startswith("static-quant: fail") and "text-coherence:" in verdict.message

    fixed = fixed_export(REAL_EXPORT, tmp_path / "smollm2-fixed")
    _code, out2, cases2, recs2 = _night(tmp_path, fixed, tree, "fixed")
    assert "test_quant_metadata" in cases2, out2
    assert cases2["test_quant_metadata"].find("failure") is None and cases2["test_quant_metadata"].find("skipped") is None
    assert recs2["test_quant_metadata"].status == "passed"
    assert "30 MLP Mul ranges calibrated, no integer tensor quantized" in recs2["test_quant_metadata"].message
    assert recs2["test_export_verdict"].message.startswith("static-quant: pass"), recs2["test_export_verdict"].message
    # Same weights: the CPU (which reads no quantInfo) answers exactly as with the shipped export.
    for case in ("france", "cat"):
        assert recs2[f"test_generation[cpu-{case}]"].text == recs[f"test_generation[cpu-{case}]"].text
