"""A user's ExecuTorch export as it comes (model.pte + tokenizer.json) through the ExecuTorch suite
on the HTP emulator: it runs (its format read from its records, else its own `qnn` testcase), one
built by a newer QAIRT than the emulator's is refused before it runs naming both versions, the
runner's own words reach the verdict, and a --model-dir with nothing to run is exit 4."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.evidence import Clock, Timing
from harness.inventory import load_inventory
from harness.report import TestRecord
from harness.runners.executorch import UNRECORDED_QNN, read_catalogue
from harness.suite import ET_FORMAT_RUNS, EXECUTORCH_QNN, Instance, run_check
from harness.suite.executorch import build_et_input
from harness.transport import LocalTransport
from tests.qnn.material import ET_QNN, NEWER_CTX, emulator_extras_or_skip, et_qnn_or_skip, pte_with_context

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.real_qnn, pytest.mark.slow, pytest.mark.timeout(600)]


def _export(tmp_path: Path, pte: Path, *, newer: bool = False) -> Path:
    folder = tmp_path / "export"
    folder.mkdir(parents=True)
    if newer:
        pte_with_context(pte, NEWER_CTX.read_bytes(), folder / "model.pte")
    else:
        shutil.copy(pte, folder / "model.pte")
    shutil.copy(et_qnn_or_skip("llm", "tokenizer.json"), folder / "tokenizer.json")
    return folder


def _devices(tmp_path: Path) -> Path:
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w")}]}))
    return inv


def _decide(tmp_path: Path, model_dir: Path, quant: str) -> TestRecord:
    transport = LocalTransport(load_inventory(_devices(tmp_path)).get("emu"))
    inp = build_et_input(transport, model_dir, work=tmp_path / "work", device_runtime=None)
    rec = TestRecord(name=f"test_quant_format_runs[{quant}]", suite="executorch_qnn", device="emu")
    try:
        run_check(EXECUTORCH_QNN, ET_FORMAT_RUNS, Instance(quant=quant), inp, rec)
    finally:
        inp.cleanup()
    return rec


def test_the_format_is_read_from_the_exports_records(tmp_path: Path) -> None:
    export = _export(tmp_path, et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte"))
    assert set(read_catalogue(export, "SM8650").formats) == {UNRECORDED_QNN}
    (export / "export_args.json").write_text(json.dumps({"ptq": "16a4w", "model": "SM8650"}))
    assert set(read_catalogue(export, "SM8650").formats) == {"16a4w"}


def test_a_single_folder_export_runs_on_the_emulator(tmp_path: Path) -> None:
    emulator_extras_or_skip()
    rec = _decide(tmp_path, _export(tmp_path, et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte")), UNRECORDED_QNN)
    # It ran (its text, on the emulator); with no float reference beside it the cell cannot be
    # judged and says what to add (issue 33), never a silent pass.
    assert rec.status == "skipped" and "qnn ran, but" in rec.message, rec.message
    assert "reference/reference.json" in rec.message
    assert rec.text.strip() and rec.evidence.get(Timing) == Timing(Clock.EMULATOR)


def test_a_newer_qairt_export_is_refused_before_it_runs_naming_both(tmp_path: Path) -> None:
    emulator_extras_or_skip()
    export = _export(tmp_path, et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte"), newer=True)
    rec = _decide(tmp_path, export, UNRECORDED_QNN)
    assert rec.status == "failed" and rec.failure_class == "binary-mismatch", rec.message
    assert "refused before it ran" in rec.message and "built by QAIRT 2.51.0" in rec.message
    assert "the host's QAIRT, the HTP emulator is QAIRT 2.49.40" in rec.message and "llama.py" in rec.message
    assert rec.extras["load_preflight"] == "qairt-too-new"
    assert not (tmp_path / "w" / "models").exists()  # nothing was provisioned


def test_the_runners_own_error_line_is_in_the_verdict(tmp_path: Path) -> None:
    emulator_extras_or_skip()
    # A forward program is not runner-ready: ExecuTorch's LLM runner refuses it in its own words.
    rec = _decide(tmp_path, _export(tmp_path, et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte")), UNRECORDED_QNN)
    assert rec.status == "failed", rec.message
    assert "Required metadata method get_max_seq_len not found in model" in rec.message
    assert "Failed to create text llm runner" in rec.message and "Failed to create text llm runner" in rec.log_excerpt


def test_a_model_dir_with_nothing_to_run_is_exit_4(tmp_path: Path) -> None:
    if not ET_QNN.is_dir():
        pytest.skip(f"{ET_QNN} is absent")
    empty = tmp_path / "notes"
    empty.mkdir()
    (empty / "README.txt").write_text("an export goes here\n")
    res = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "executorch_qnn"), "-q", "-p", "no:cacheprovider",
         "--device", "emu", "--devices-file", str(_devices(tmp_path)), "--model-dir", str(empty)],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 4, res.stdout[-2000:]
    assert f"--model-dir {empty}: no program the ExecuTorch suite can run (it holds README.txt)" in res.stdout


def _plan(tmp_path: Path, model_dir: Path) -> Path:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "user-export", "devices": ["emu"],
                                    "models": {"mine": {"path": str(model_dir), "kind": "executorch"}},
                                    "suites": [{"name": "executorch_qnn", "models": ["mine"]}],
                                    "health": {"min_battery_pct": 0}}))
    return plan


def test_the_night_refuses_a_newer_qairt_export_naming_both(tmp_path: Path, capsys) -> None:
    from harness.cli import main

    emulator_extras_or_skip()
    export = _export(tmp_path, et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte"), newer=True)
    rc = main(["--file", str(_devices(tmp_path)), "lab", "run", "--plan", str(_plan(tmp_path, export)),
               "--out", str(tmp_path / "night")])
    assert rc == 1, capsys.readouterr().err[-2000:]
    junit = (tmp_path / "night" / "junit.xml").read_text()
    assert 'name="test_quant_format_runs[qnn]"' in junit and "binary-mismatch" in junit
    assert "built by QAIRT 2.51.0" in junit and "is QAIRT 2.49.40" in junit


def test_a_night_whose_executorch_model_holds_nothing_is_a_plan_error(tmp_path: Path, capsys) -> None:
    from harness.cli import main

    empty = tmp_path / "nothing"
    empty.mkdir()
    (empty / "tokenizer.json").write_text("{}")
    rc = main(["--file", str(_devices(tmp_path)), "lab", "run", "--plan", str(_plan(tmp_path, empty)),
               "--out", str(tmp_path / "night")])
    err = capsys.readouterr().err
    assert rc == 4, err
    assert f"{empty} holds no program the ExecuTorch suite 'executorch_qnn' can run (it holds tokenizer.json)" in err
