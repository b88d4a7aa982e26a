"""A plan suite's runner comes from the registered suite: `- name: executorch_qnn` drives
ExecuTorch (no llm_demo runtime folder asked for), `runner:` may only repeat it, and the
night's job for it is the ExecuTorch one (harness/lab/jobs.py by RunnerKind)."""

from __future__ import annotations

from pathlib import Path

import pytest
from labkit import write_plan

from harness.lab.plan import PlanError, load_plan
from harness.runners import RunnerKind
from harness.suite import EXECUTORCH_QNN, Scope


def _with_program(plan: Path) -> Path:
    """The plan's model folder holds a program (an ExecuTorch suite's folder without one is a plan error)."""
    (plan.parent / "exports" / "tiny" / "model.pte").write_bytes(b"")
    return plan


def test_the_executorch_suite_needs_no_llm_demo_runtime(tmp_path: Path) -> None:
    plan = load_plan(_with_program(write_plan(tmp_path, suites=[{"name": "executorch_qnn", "models": ["tiny"]}],
                                              options={})))
    (suite,) = plan.suites
    assert suite.runner == "executorch" and suite.suite.runner is RunnerKind.EXECUTORCH
    assert [c.name for c in suite.suite.checks] == [c.name for c in EXECUTORCH_QNN.checks]


def test_a_runner_the_suite_does_not_drive_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as err:
        load_plan(write_plan(tmp_path, suites=[{"name": "executorch_qnn", "runner": "llm_demo", "models": ["tiny"]}]))
    assert "suites.executorch_qnn.runner" in str(err.value) and "drives executorch" in str(err.value)
    with pytest.raises(PlanError, match="drives llm_demo"):
        load_plan(write_plan(tmp_path, suites=[{"name": "qwen3", "runner": "executorch", "models": ["tiny"]}]))


def test_selection_and_testcase_names_of_the_format_matrix(tmp_path: Path) -> None:
    plan = load_plan(_with_program(write_plan(tmp_path, suites=[{"name": "executorch_qnn", "models": ["tiny"],
                                                                 "checks": ["qnn"]}], options={})))
    suite = plan.suites[0].suite
    check, judged = suite.checks  # the format cells, then whether they judged anything
    assert check.scope is Scope.FORMAT and judged.name == "judged"
    names = [check.testcase(i) for i in suite.instances(check, visual=False, case_ids=[])]
    assert names[:3] == ["test_quant_format_runs[16a16w]", "test_quant_format_runs[16a8w]",
                         "test_quant_format_runs[16a4w]"] and len(names) == 9
    assert names[-1] == "test_quant_format_runs[qnn]"  # a single export whose format no record names


def test_a_suite_entry_asks_for_localization_where_its_suite_localizes(tmp_path: Path) -> None:
    plan = load_plan(_with_program(write_plan(tmp_path, suites=[{"name": "executorch_qnn", "models": ["tiny"],
                                                                 "localize": True}], options={})))
    assert plan.suites[0].localize and "localize" in [c.name for c in plan.suites[0].suite.checks]
    with pytest.raises(PlanError) as err:
        load_plan(write_plan(tmp_path, suites=[{"name": "qwen3", "models": ["tiny"], "localize": True}]))
    assert "suites.qwen3.localize" in str(err.value) and "has no localize check" in str(err.value)
    with pytest.raises(PlanError, match="suites.executorch_qnn.localize"):
        load_plan(_with_program(write_plan(tmp_path, suites=[{"name": "executorch_qnn", "models": ["tiny"],
                                                              "localize": "yes"}], options={})))
