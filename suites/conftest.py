"""Shared fixtures for the device suites: the backend matrix is run once per session and
every test asserts on its part of it (one llm_demo process per prompt and pair)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

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
