"""Real QNN programs for the placement tests, lowered once per session by the host's QNN
(virtual_lab.qnn_build) into the session's cache folder; skipped with the reason without the
`qnn` and `executorch` extras."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from harness.hostfiles import user_cache_dir
from harness.qnn import HOST_QNN_SWITCH, auto_host_qnn
from virtual_lab.qnn_build import ProgramSpec, build_programs

RELU_ON_CPU = ProgramSpec("SM8650", ("aten.relu.default",))  # the partitioner leaves the relu to the CPU


@pytest.fixture(scope="session")
def tiny_qnn_programs() -> dict[ProgramSpec, Path]:
    for mod, extra in (("executorch.backends.qualcomm", "executorch"), ("onnxruntime_qnn", "qnn")):
        try:
            found = importlib.util.find_spec(mod)
        except ModuleNotFoundError:
            found = None
        if found is None:
            pytest.skip(f"lowering a QNN program needs the optional `{extra}` extra (pip install 'harness[{extra}]')")
    env = {k: v for k, v in os.environ.items() if k != HOST_QNN_SWITCH}
    host, why = auto_host_qnn(environ=env)
    if host is None:
        pytest.skip(f"no host QAIRT libraries to lower with: {why}")
    # HARNESS_CACHE_DIR is the session's temp folder (tests/conftest.py): built once per session.
    # One lowering: whole programs are ../shared's (their tests read those).
    return build_programs([RELU_ON_CPU], user_cache_dir() / "qnn-programs", host.child_env(env))
