"""The ExecuTorch suite's QNN check on real failing runs on the HTP emulator: a truncated
program is QNN's corrupt-PTE failure (init-error, classified from the real log by
harness/qnn/log.py), an output that does not match its fake-quant reference fails
as disagreement naming the cosine and argmax figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.evidence import Clock, Timing
from harness.inventory import load_inventory
from harness.report import TestRecord
from harness.suite import ET_FORMAT_RUNS, EXECUTORCH_QNN, Instance, run_check
from harness.suite.executorch import build_et_input
from harness.transport import LocalTransport
from tests.qnn.material import ET_QNN, emulator_extras_or_skip

SRC = ET_QNN / "pte" / "qwen3-16a4w-sm8650"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture
def material(tmp_path: Path) -> Path:
    emulator_extras_or_skip()
    if not SRC.with_suffix(".pte").is_file():
        pytest.skip(f"{SRC.parent.parent} is absent: these runs use ../shared's QNN programs")
    folder = tmp_path / "material" / "pte"
    folder.mkdir(parents=True)
    for suffix in (".build.json", ".input.npy", ".ref_fakequant.npy", ".pte"):
        shutil.copy(SRC.with_name(SRC.name + suffix), folder / (SRC.name + suffix))
    return folder


def _decide(tmp_path: Path) -> TestRecord:
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w")}]}))
    transport = LocalTransport(load_inventory(inv).get("emu"))
    inp = build_et_input(transport, tmp_path / "material", work=tmp_path / "work", device_runtime=None)
    rec = TestRecord(name="test_quant_format_runs[16a4w]", suite="executorch_qnn", device="emu")
    run_check(EXECUTORCH_QNN, ET_FORMAT_RUNS, Instance(quant="16a4w"), inp, rec)
    return rec


def test_a_truncated_program_is_qnns_corrupt_pte(material: Path, tmp_path: Path) -> None:
    pte = material / (SRC.name + ".pte")
    pte.write_bytes(pte.read_bytes()[:200_000])
    rec = _decide(tmp_path)
    assert rec.status == "failed" and rec.failure_class == "init-error", rec.message
    assert rec.extras["qnn_log"]["failure"] == "corrupt-pte" and "truncated or corrupt" in rec.message
    assert rec.evidence.get(Timing) == Timing(Clock.EMULATOR)


def test_an_output_off_its_reference_fails_naming_the_figures(material: Path, tmp_path: Path) -> None:
    ref = material / (SRC.name + ".ref_fakequant.npy")
    values = np.load(ref)
    np.save(ref, values[..., np.random.default_rng(1).permutation(values.shape[-1])])
    rec = _decide(tmp_path)
    assert rec.status == "failed" and rec.failure_class == "disagree", rec.message
    assert "cos" in rec.message and "argmax" in rec.message and not rec.extras["reference_agreement"]["passed"]
    build = json.loads((material / (SRC.name + ".build.json")).read_text())
    assert build["recipe"] == "16a4w"  # the format the record is of
