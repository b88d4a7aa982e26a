"""Shared fixtures for the device suites: the backend matrix is run once per session and
every test asserts on its part of it (one llm_demo process per prompt and pair). A suite
gives its own `cases` (the prompts) and `fits` (skips another model type)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from harness import pipeline
from harness.runners.cases import write_test_image
from harness.runners.llm_demo import LlmDemoRunner


@pytest.fixture(scope="session")
def llm_runner(transport, qnn_runtime, provisioned_model) -> Iterator[LlmDemoRunner]:  # type: ignore[no-untyped-def]
    runner = LlmDemoRunner(transport, qnn_runtime, provisioned_model)
    yield runner
    runner.cleanup()


@pytest.fixture(scope="session")
def test_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_image(tmp_path_factory.mktemp("inputs") / "red-square.png")


@pytest.fixture(scope="session")
def matrix(fits, llm_runner, provisioned_model, backends, cases, device,  # type: ignore[no-untyped-def]
           qnn_runtime) -> dict[str, pipeline.PairRun]:
    return pipeline.run_matrix(llm_runner, cases, pipeline.select_pairs(provisioned_model, backends, device, qnn_runtime))


@pytest.fixture(scope="session")
def judged(matrix, cases, provisioned_model) -> dict[tuple[str, str], pipeline.Judgement]:  # type: ignore[no-untyped-def]
    return {(j.pair, j.case.id): j
            for j in pipeline.judge_matrix(matrix, cases, system=provisioned_model.system_prompt)}
