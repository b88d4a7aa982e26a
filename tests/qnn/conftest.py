"""Real QNN programs for the placement tests, lowered once per session by the host's QNN
(virtual_lab.qnn_cache: the session's cache folder, keyed by the toolchain); skipped with the
reason without the `qnn` and `executorch` extras."""

from __future__ import annotations

from pathlib import Path

import pytest

from virtual_lab.qnn_build import ProgramSpec
from virtual_lab.qnn_cache import find_builder

RELU_ON_CPU = ProgramSpec("SM8650", ("aten.relu.default",))  # the partitioner leaves the relu to the CPU


@pytest.fixture(scope="session")
def tiny_qnn_programs() -> dict[ProgramSpec, Path]:
    builder, why = find_builder()
    if builder is None:
        pytest.skip(f"lowering a QNN program needs the host's QNN: {why}")
    # HARNESS_CACHE_DIR is the session's temp folder (tests/conftest.py): built once per session.
    # One lowering: whole programs are ../shared's (their tests read those).
    return builder.programs([RELU_ON_CPU])
