"""The ExecuTorch suite's `localize` check: it runs when its format's cell failed (that sibling
record) or when asked, skips a lone program saying how to rebuild it, and on the real debug build
(the session's lowering, tests/conftest.py) runs the debug program on the emulated HTP and records
the first departing op as typed evidence that reads back from the record's JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from harness.evidence import LocalizeEvidence, Outcome
from harness.inventory import load_inventory
from harness.outcomes import FailureClass
from harness.report import TestRecord
from harness.suite import EXECUTORCH_QNN, Instance, run_check
from harness.suite.executorch import build_et_input
from harness.transport import LocalTransport
from harness.verdict import Verdict
from tests.qnn.material import emulator_extras_or_skip, et_qnn_or_skip

pytestmark = [pytest.mark.timeout(900)]
LOCALIZE = EXECUTORCH_QNN.check("localize")


def _export(tmp_path: Path, debug: Path | None = None, *, own_scripts: bool = False) -> Path:
    """A user's 16a8w export (a real SM8650 program), with the debug build in debug/ when given."""
    folder = tmp_path / "export"
    folder.mkdir()
    shutil.copy(et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte"), folder / "model.pte")
    shutil.copy(et_qnn_or_skip("llm", "tokenizer.json"), folder / "tokenizer.json")
    (folder / "export_args.json").write_text(json.dumps({"ptq": "16a8w", "model": "SM8650"}))
    if debug is not None:
        shutil.copytree(debug, folder / "debug")
    if own_scripts:
        (folder / "debug.etrecord").write_bytes(b"ETRecord of ExecuTorch's own scripts")
    return folder


def _cell(status: str) -> TestRecord:
    rec = TestRecord(name="suites/executorch_qnn/test_executorch_qnn.py::test_quant_format_runs[16a8w]",
                     suite="executorch_qnn", device="emu")
    rec.set_verdict(Verdict.passed() if status == "passed" else Verdict.failed(FailureClass.DISAGREE, "16a8w: off"))
    return rec


def _localize(tmp_path: Path, export: Path, siblings: list[TestRecord], *, asked: bool = False) -> TestRecord:
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w")}]}))
    transport = LocalTransport(load_inventory(inv).get("emu"))
    inp = build_et_input(transport, export, work=tmp_path / "work", device_runtime=None,
                         siblings=lambda: siblings, localize=asked)
    rec = TestRecord(name=LOCALIZE.testcase(Instance(quant="16a8w")), suite="executorch_qnn", device="emu")
    run_check(EXECUTORCH_QNN, LOCALIZE, Instance(quant="16a8w"), inp, rec)
    return rec


def test_a_passed_cell_is_not_localized_unless_asked(tmp_path: Path) -> None:
    rec = _localize(tmp_path, _export(tmp_path), [_cell("passed")])
    assert rec.status == "skipped"
    assert "its cell was passed; localization runs on a failed cell or when asked (pytest --localize" in rec.message


def test_a_lone_program_says_how_to_rebuild_it(tmp_path: Path) -> None:
    rec = _localize(tmp_path, _export(tmp_path, own_scripts=True), [_cell("failed")])
    assert rec.status == "skipped", rec.message
    assert "missing debug.pte, etrecord.bin, debug_inputs.npz, qnn_encodings.json" in rec.message
    assert "--debug-program" in rec.message and "keeps debug.etrecord: link it as etrecord.bin" in rec.message
    assert "the build's `debug_args`" in rec.message  # a plan's way to ask the export stage for it


@pytest.mark.real_qnn
@pytest.mark.slow
def test_a_failed_cell_is_localized_on_the_emulator(tmp_path: Path, localize_debug_export: Path) -> None:
    emulator_extras_or_skip()
    rec = _localize(tmp_path, _export(tmp_path, localize_debug_export), [_cell("failed")])
    ev = rec.evidence.get(LocalizeEvidence)
    assert ev is not None, rec.message
    assert ev.cell == "test_quant_format_runs[16a8w]" and ev.result.format == "16a8w"
    assert ev.result.outcome is not Outcome.UNDECIDABLE and len(ev.result.ops) > 50, ev.result.reason
    judged = [o for o in ev.result.ops if o.judged]
    assert judged and min(o.sqnr_db for o in judged) < max(o.sqnr_db for o in judged)  # real, varied figures
    if ev.result.first is not None:  # the healthy program's first departure (docs/localize.md#calibration)
        assert rec.status == "failed" and ev.result.first.node in rec.message
    again = TestRecord.from_dict(json.loads(rec.to_json())).evidence.get(LocalizeEvidence)
    assert again == ev
    assert not (tmp_path / "export" / "debug" / "etdump.etdp").exists()  # the export is only read


def test_a_damaged_debug_build_fails_by_name_not_as_an_internal_error(tmp_path: Path) -> None:
    """Issue 44.1: encodings nodes of the wrong types raised AttributeError through the check (a night's
    exit 3); now the check fails naming the file, as every door records it."""
    debug = tmp_path / "damaged"
    debug.mkdir()
    for name in ("debug.pte", "etrecord.bin"):
        (debug / name).write_bytes(b"not read: the encodings are refused first")
    (debug / "debug_inputs.npz").write_bytes(b"PK not read either")
    (debug / "qnn_encodings.json").write_text(json.dumps({"format": "16a8w", "nodes": ["a", 1, None]}))
    rec = _localize(tmp_path, _export(tmp_path, debug), [_cell("failed")])
    assert rec.status == "failed", rec.message
    assert "qnn_encodings.json: nodes[0]: a str, not an object" in rec.message, rec.message
