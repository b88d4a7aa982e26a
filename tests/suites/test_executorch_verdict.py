"""A QNN cell's verdict (harness/suite/executorch/float_reference.py `decide`) and the suite's
`judged` testcase (judged.py), on typed evidence made here: an op under its line is `disagree`
naming the op whatever the end-to-end figures; every op clean and over the budget is `quant-budget`;
within it a pass; a run whose QNN cells all skipped for want of a reference or an asked-for debug
build fails `unjudged`, or skips when allowed, saying what was not judged. The real lowerings'
side is tests/suites/test_executorch_float_reference.py's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.evidence import Agreement, FloatReferenceAgreement, Localization, OpGap, Outcome
from harness.inventory import load_inventory
from harness.outcomes import FailureClass, Status
from harness.report import TestRecord
from harness.suite import EXECUTORCH_QNN, Instance, run_check
from harness.suite.executorch import build_et_input
from harness.suite.executorch.float_reference import decide
from harness.transport import LocalTransport
from harness.verdict import Verdict


def _agreement(verdict: str, kl: float = 0.033) -> FloatReferenceAgreement:
    reasons = (f"median mean KL {kl} > budget 0.02",) if verdict == "over-budget" else ()
    return FloatReferenceAgreement("/x/reference/reference.json", Agreement(verdict), kl, kl, 0.4, 0.5, 0.1, 0.12, reasons,
                                   budget_kl=0.02, budget_nll_gap=0.25)


def _ops(fault_db: float | None) -> Localization:
    ops = (OpGap(0, "aten_linear_default", "aten.linear.default", "layers.0", 41.0, 0.999, 0.0),
           OpGap(1, "aten_mul_tensor_11", "aten.mul.Tensor", "layers.5", fault_db or 35.6, 0.6, 0.3))
    if fault_db is None:
        return Localization(Outcome.NONE, 20.0, "16a4w", ops)
    return Localization(Outcome.DEPARTED, 20.0, "16a4w", ops, first=ops[1])


@pytest.mark.parametrize("agreement", ["agree", "over-budget"])
def test_an_op_under_its_line_is_a_fault_named_whatever_the_end_to_end(agreement: str) -> None:
    v = decide("16a4w", _agreement(agreement), _ops(3.8))
    assert v.status is Status.FAILED and v.failure_class is FailureClass.DISAGREE
    assert "a fault at aten_mul_tensor_11 (aten.mul.Tensor, layers.5): 3.8 dB SQNR, under 20 dB" in v.message


def test_every_op_clean_over_the_budget_is_the_quantizations_cost() -> None:
    v = decide("16a4w", _agreement("over-budget"), _ops(None))
    assert v.status is Status.FAILED and v.failure_class is FailureClass.QUANT_BUDGET
    assert "over its quality budget (median mean KL 0.033 > budget 0.02)" in v.message
    assert "every op clean" in v.message and "lowest aten_linear_default" not in v.message
    assert "--quant-budget" in v.message


def test_every_op_clean_within_the_budget_passes_saying_both() -> None:
    v = decide("16a4w", _agreement("agree", 0.01), _ops(None))
    assert v.status is Status.PASSED and "within its budget" in v.message and "every op clean" in v.message


def test_without_per_op_evidence_the_budget_decides_and_says_it_could_not_tell() -> None:
    over = decide("16a4w", _agreement("over-budget"), "no debug build")
    assert over.failure_class is FailureClass.QUANT_BUDGET
    assert "not localized (no debug build): a fault is not told apart" in over.message
    assert decide("16a4w", _agreement("agree"), "no debug build").status is Status.PASSED
    assert decide("16a4w", _agreement("disagree"), "x").failure_class is FailureClass.DISAGREE  # not finite


def _rec(name: str, verdict: Verdict) -> TestRecord:
    rec = TestRecord(name=f"suites/executorch_qnn/test_executorch_qnn.py::{name}", suite="executorch_qnn", device="emu")
    rec.set_verdict(verdict)
    return rec


def _judged(tmp_path: Path, siblings: list[TestRecord], *, allow: bool = False) -> TestRecord:
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w")}]}))
    inp = build_et_input(LocalTransport(load_inventory(inv).get("emu")), tmp_path, work=tmp_path / "work",
                         device_runtime=None, siblings=lambda: siblings, allow_unjudged=allow)
    check = EXECUTORCH_QNN.check("judged")
    rec = TestRecord(name=check.testcase(Instance()), suite="executorch_qnn", device="emu")
    run_check(EXECUTORCH_QNN, check, Instance(), inp, rec)
    return rec


NO_REF = Verdict.skipped("16a8w ran, but /m: no float reference (reference/reference.json)", FailureClass.UNJUDGED)


def test_all_cells_skipped_for_want_of_a_reference_is_unjudged(tmp_path: Path) -> None:
    cells = [_rec("test_quant_format_runs[16a8w]", NO_REF),
             _rec("test_quant_format_runs[8a8w]", Verdict.skipped("no 8a8w program in /m (have: 16a8w)"))]
    rec = _judged(tmp_path, cells)
    assert rec.status == "failed" and rec.failure_class == "unjudged", rec.message
    assert "test_quant_format_runs[16a8w]: 16a8w ran, but /m: no float reference" in rec.message and "8a8w]" not in rec.message
    allowed = _judged(tmp_path, cells, allow=True)
    assert allowed.status == "skipped" and "test_quant_format_runs[16a8w]: 16a8w ran" in allowed.message
    assert "allowed: --allow-unjudged" in allowed.message


def test_an_asked_localization_left_undone_is_unjudged_though_the_cells_passed(tmp_path: Path) -> None:
    cells = [_rec("test_quant_format_runs[16a8w]", Verdict.passed()),
             _rec("test_localize[16a8w]", Verdict.skipped("16a8w: no debug build", FailureClass.UNJUDGED))]
    rec = _judged(tmp_path, cells)
    assert rec.failure_class == "unjudged" and "test_localize[16a8w]: 16a8w: no debug build" in rec.message


def test_one_judged_cell_is_enough_and_no_qnn_cell_is_a_skip(tmp_path: Path) -> None:
    cells = [_rec("test_quant_format_runs[16a8w]", NO_REF),
             _rec("test_quant_format_runs[16a4w]", Verdict.failed(FailureClass.QUANT_BUDGET, "over"))]
    assert _judged(tmp_path, cells).status == "passed"
    assert _judged(tmp_path, [_rec("test_cpu_export_runs", Verdict.passed())]).status == "skipped"
