"""An MNN QNN cell through both doors (suite qwen3 on the virtual OnePlus 13): a stub with one op
compiled outside its QNN graphs (a UnaryOp beside the 29 Plugin ops, written with MNN's own
converter) fails `test_generation[qnn-*]` through pytest as `cpu-fallback`, naming the op, while
the CPU pair passes; a night whose plan lists it under the suite's `expected_cpu_ops` passes the
same cells, carrying their placement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # a pytest session and a night on the virtual lab


def _add_cpu_op(graph: dict) -> None:
    """One UnaryOp on the stub's first input, outside every QNN Plugin op."""
    out = len(graph["tensorName"])
    graph["tensorName"].append("extra_abs_out")
    first = next(op for op in graph["oplists"] if op["type"] == "Input")
    graph["oplists"].append({"type": "UnaryOp", "main_type": "UnaryOp", "main": {"opType": "ABS", "T": "DT_FLOAT"},
                             "name": "extra_abs", "inputIndexes": [first["outputIndexes"][0]], "outputIndexes": [out]})


def _run(vlab, export: Path, runtime: Path, records: Path, *extra: str) -> dict[str, dict]:
    proc = subprocess.run([sys.executable, "-m", "pytest", str(REPO / "suites" / "qwen3"), "-p", "no:cacheprovider",
                           "-q", "--device", "oneplus13", "--devices-file", str(vlab.devices_yaml), "--model-dir",
                           str(export), "--runtime-dir", str(runtime), "--backends", "qnn,cpu", "-k", "generation",
                           f"--harness-records={records}", *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    recs = {json.loads(ln)["name"].split("::", 1)[1]: json.loads(ln) for ln in records.read_text().splitlines()}
    assert recs, proc.stdout + proc.stderr
    return recs


def test_a_qnn_cell_with_an_op_outside_qnn_fails_cpu_fallback(vlab_factory, tmp_path: Path) -> None:
    from virtual_lab.exports import make_qwen3_export
    from virtual_lab.exports.binaries import edit_stub
    from virtual_lab.runtime import make_runtime_dir

    vlab = vlab_factory()
    export = make_qwen3_export(tmp_path / "qwen3", size_mb=1).path
    edit_stub(export / "qnn" / "llm.mnn", _add_cpu_op)
    runtime = make_runtime_dir(tmp_path / "rt", "v79")
    recs = _run(vlab, export, runtime, tmp_path / "a.jsonl")
    cell = recs["test_generation[qnn-france]"]
    assert cell["status"] == "failed" and cell["failure_class"] == "cpu-fallback", cell
    assert "beyond those expected: UnaryOp x1" in cell["message"] and "QNN x29" in cell["message"]
    assert recs["test_generation[cpu-france]"]["status"] == "passed"
    # The night, its plan expecting the op: the same cell passes with its placement.
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "placement", "devices": ["oneplus13"], "models": {"qwen3": {"path": str(export)}},
        "suites": [{"name": "qwen3", "models": ["qwen3"], "backends": ["qnn"], "checks": ["generation"],
                    "expected_cpu_ops": {"UnaryOp": 1}}],
        "options": {"runtime_dir": str(runtime)}, "locks": {"dir": str(tmp_path / "locks")}}))
    night = subprocess.run([sys.executable, "-m", "harness.cli", "--file", str(vlab.devices_yaml), "lab", "run",
                            "--plan", str(plan), "--out", str(tmp_path / "night")], cwd=REPO, capture_output=True,
                           text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO)})
    recs = {json.loads(ln)["name"]: json.loads(ln)
            for ln in (tmp_path / "night" / "records.jsonl").read_text().splitlines()}
    cell = recs["test_generation[qnn-france]"]
    assert cell["status"] == "passed", (cell, night.stdout + night.stderr)
    placed = cell["extras"]["placement"]
    assert placed["unexpected"] == {} and placed["expected"]["UnaryOp"] == 1
    assert placed["summary"] == "QNN x29; on the CPU: UnaryOp x1"
