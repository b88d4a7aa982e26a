"""A user's own ExecuTorch QNN export judged against its own float model on the host's real HTP
emulator (docs/executorch-reference.md): examples/et_qnn/lower_decoder.py's random-weight SwiGLU
decoder lowered for SM8650 at 16a8w, healthy and with the seed's fault planted (plant_fault.py:
layer 1's SwiGLU MUL output quantized with its operand's range). The faithful one passes with its
figures in JUnit, the faulty one fails naming its reference, one without reference/ skips saying
what to add. The two lowerings are made once per test session (keyed by the exporter's content)
in the session's harness cache."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.evidence import FloatReferenceAgreement
from harness.inventory import load_inventory
from harness.report import TestRecord, extra_properties
from harness.suite import ET_FORMAT_RUNS, EXECUTORCH_QNN, Instance, run_check
from harness.suite.executorch import build_et_input
from harness.transport import LocalTransport
from tests.qnn.material import emulator_extras_or_skip

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "et_qnn"
FORMAT = "16a8w"
ARGS = ["--soc", "SM8650", "--format", FORMAT, "--layers", "2", "--dim", "64", "--mlp", "swiglu"]

# Two lowerings (~30 s each alone) and three cells; a loaded shared host has taken 15 minutes.
pytestmark = [pytest.mark.real_qnn, pytest.mark.slow, pytest.mark.timeout(1800)]


def _lower(out: Path, faulty: bool) -> None:
    from harness.qnn import find_host_qnn

    script = EXAMPLE / ("plant_fault.py" if faulty else "lower_decoder.py")
    env = find_host_qnn().child_env(dict(os.environ))
    argv = [sys.executable, str(script), *ARGS, "--out", str(out), *(["--fault-layer", "1"] if faulty else [])]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="session")
def exports() -> dict[str, Path]:
    """healthy/, faulty/ and noref/ (the healthy program without reference/), each a --model-dir
    with one 16a8w/ export; built once per content of the exporter."""
    emulator_extras_or_skip()
    digest = hashlib.sha256(b"".join((EXAMPLE / f).read_bytes() for f in ("lower_decoder.py", "plant_fault.py")))
    digest.update(repr(ARGS).encode())
    root = Path(os.environ["HARNESS_CACHE_DIR"]) / "et-float-reference" / digest.hexdigest()[:16]
    for name in ("healthy", "faulty"):
        if not (root / name / FORMAT / "reference" / "reference.json").is_file():
            tmp = root / f"{name}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            _lower(tmp / FORMAT, faulty=name == "faulty")
            tmp.rename(root / name)
    noref = root / "noref" / FORMAT
    if not noref.is_dir():
        shutil.copytree(root / "healthy" / FORMAT, noref, ignore=shutil.ignore_patterns("reference"))
    return {name: root / name for name in ("healthy", "faulty", "noref")}


def _cell(material: Path, tmp_path: Path) -> TestRecord:
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w")}]}))
    transport = LocalTransport(load_inventory(inv).get("emu"))
    inp = build_et_input(transport, material, work=tmp_path / "work", device_runtime=None)
    rec = TestRecord(name=f"test_quant_format_runs[{FORMAT}]", suite="executorch_qnn", device="emu")
    try:
        run_check(EXECUTORCH_QNN, ET_FORMAT_RUNS, Instance(quant=FORMAT), inp, rec)
    finally:
        inp.cleanup()
    return rec


def test_a_faithful_export_passes_with_its_figures_in_junit(exports: dict[str, Path], tmp_path: Path) -> None:
    rec = _cell(exports["healthy"], tmp_path)
    assert rec.status == "passed", rec.message
    ag = rec.evidence.get(FloatReferenceAgreement)
    assert ag is not None and ag.verdict == "agree" and len(ag.prompts) == 3
    props = extra_properties(rec)
    assert props["float_reference"] == "agree" and float(props["float_reference_median_kl"]) >= 0
    assert props["float_reference_file"].endswith("reference/reference.json")
    back = TestRecord.from_dict(rec.to_dict()).evidence.get(FloatReferenceAgreement)
    assert back == ag  # the typed evidence survives the record's JSON


def test_a_faulty_export_fails_naming_its_reference(exports: dict[str, Path], tmp_path: Path) -> None:
    rec = _cell(exports["faulty"], tmp_path)
    assert rec.status == "failed" and rec.failure_class == "disagree", rec.message
    assert str(exports["faulty"] / FORMAT / "reference" / "reference.json") in rec.message
    assert "median mean KL" in rec.message, rec.message
    ag = rec.evidence.get(FloatReferenceAgreement)
    assert ag is not None and ag.verdict == "disagree"


def test_an_export_without_a_reference_skips_saying_what_to_add(exports: dict[str, Path], tmp_path: Path) -> None:
    rec = _cell(exports["noref"], tmp_path)
    assert rec.status == "skipped", rec.message
    assert "no float reference (reference/reference.json)" in rec.message
    assert "docs/executorch-reference.md" in rec.message and str(exports["noref"] / FORMAT) in rec.message
