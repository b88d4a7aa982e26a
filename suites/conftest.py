"""Shared fixtures for the device suites: the backend matrix is run once per session and
every test asserts on its part of it (one llm_demo process per prompt and pair). A suite's
test module gives its `SUITE` (harness/suite/registry.py); the tests come from
suites/support.py, so no check is written twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import pipeline
from harness.pairs import BackendPair
from harness.plugin import session_records
from harness.runners import PromptCase, write_test_image
from harness.runners.llm_demo import LlmDemoRunner
from harness.suite import (
    DeviceInput,
    ExportInput,
    MatrixInput,
    Suite,
    SummaryInput,
    fit_reason,
    pair_skip_reason,
    select_pairs,
    suite_cases,
)
from suites.support import selected


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--checks NAMES`: only the tests of the checks (or groups) named run."""
    if not config.getoption("--checks", default=None):
        return
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("suite_check")
        check = marker.args[0] if marker is not None else None
        suite = getattr(getattr(item, "module", None), "SUITE", None)
        if check is None or suite is None or check in {c.name for c in selected(suite, config).checks}:
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def llm_runner(transport, qnn_runtime, provisioned_model) -> Iterator[LlmDemoRunner]:
    runner = LlmDemoRunner(transport, qnn_runtime, provisioned_model)
    yield runner
    runner.cleanup()


@pytest.fixture(scope="session")
def test_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_image(tmp_path_factory.mktemp("inputs") / "red-square.png")


@pytest.fixture(scope="session")
def cases(suite: Suite, request: pytest.FixtureRequest) -> list[PromptCase]:
    visual = bool(suite.visual)
    return suite_cases(visual, request.getfixturevalue("test_image") if visual else None)


@pytest.fixture(scope="session")
def export_input(model_dir: Path, pytestconfig: pytest.Config) -> ExportInput:
    sdk = pytestconfig.getoption("--qnn-sdk", default=None)
    return ExportInput(model_dir, Path(sdk) if sdk else None)


@pytest.fixture(scope="session")
def matrix_input(suite: Suite, provisioned_model, request: pytest.FixtureRequest) -> MatrixInput:
    """The matrix as the cell and pair checks see it; not run for an export the suite does not fit."""
    model = provisioned_model
    if fit_reason(suite, model.model_type) is not None:
        return MatrixInput(model, {}, {}, lambda _p: None)  # every testcase skips on the fit
    get = request.getfixturevalue
    backends, device, runtime = get("backends"), get("device"), get("qnn_runtime")
    judged = {(j.pair, j.case.id): j for j in get("judged")}
    return MatrixInput(model, get("matrix"), judged,
                       lambda p: pair_skip_reason(p, model, backends, device, runtime),
                       get("model_dir"), get("expected_cpu_ops"), runtime.qairt_build if runtime else None)


@pytest.fixture(scope="session")
def device_input(suite: Suite, provisioned_model, request: pytest.FixtureRequest) -> DeviceInput:
    model = provisioned_model
    if fit_reason(suite, model.model_type) is not None:
        return DeviceInput(None, model)  # skipped on the fit before anything runs
    get = request.getfixturevalue
    return DeviceInput(get("llm_runner"), model, image=get("test_image") if model.visual else None)


@pytest.fixture
def summary_input(suite: Suite, provisioned_model, device, request: pytest.FixtureRequest) -> SummaryInput:
    """This session's records of the suite on this device so far (the tests before this one)."""
    mine = [r for r in session_records(request.config) if r.suite == suite.name and r.device == device.name]
    return SummaryInput(provisioned_model.model_type, mine)


@pytest.fixture(scope="session")
def matrix(suite: Suite, llm_runner, provisioned_model, backends, cases, device,
           qnn_runtime) -> dict[BackendPair, pipeline.PairRun]:
    return pipeline.run_matrix(llm_runner, cases, select_pairs(provisioned_model, backends, device, qnn_runtime))


@pytest.fixture(scope="session")
def judged(matrix, cases, provisioned_model) -> list[pipeline.Judgement]:
    return pipeline.judge_matrix(matrix, cases, system=provisioned_model.system_prompt)
