"""A user's own ExecuTorch QNN export judged against its own float model on the host's real HTP
emulator (docs/executorch-reference.md): examples/et_qnn/lower_decoder.py's random-weight SwiGLU
decoder lowered for SM8650 at 16a8w, healthy and with the seed's fault planted (plant_fault.py:
layer 1's SwiGLU MUL output quantized with its operand's range). The faithful one passes with its
figures in JUnit, the faulty one fails naming its reference, one without reference/ skips saying
what to add. The two lowerings are the session's (tests/conftest.py `float_reference_exports`), made
once per run with the other tests' lowerings of the same model."""

from __future__ import annotations

import shutil
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

FORMAT = "16a8w"

# Three cells on the emulator (the test that builds the session's lowerings gets their budget from
# tests/conftest.py); a loaded shared host has taken 15 minutes.
pytestmark = [pytest.mark.real_qnn, pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="session")
def exports(float_reference_exports: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """healthy/, faulty/ (the session's lowerings, tests/conftest.py) and noref/ (the healthy program
    without reference/), each a --model-dir with one 16a8w/ export."""
    emulator_extras_or_skip()
    noref = tmp_path_factory.mktemp("et-float-noref")
    shutil.copytree(float_reference_exports["healthy"] / FORMAT, noref / FORMAT, ignore=shutil.ignore_patterns("reference"))
    return {**float_reference_exports, "noref": noref}


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
