"""ExecuTorch exports on the device: the checks of harness.suite.EXECUTORCH_QNN (each quant
format's program through ExecuTorch's real runner with the QNN backend, skipped with the
HTP-arch reason where the format cannot run; the CPU exports; the real load failure; an ETDump
profile), the same list `harness lab run` iterates for a plan's `- name: executorch_qnn`.

    pytest suites/executorch_qnn --device sm8650-emu     # the host's QAIRT HTP emulator, ../shared's programs
    pytest suites/executorch_qnn --device host           # ExecuTorch's real LLM runner on the CPU
    pytest suites/executorch_qnn --device oneplus13 --model-dir ET_EXPORTS --runtime-dir ET_RUNTIME [--qnn-sdk SDK]

ET_EXPORTS holds one folder per format (16a4w/, 16a8w/, 8a8w/ ... and CPU exports such as
xnnpack/), or is one export, or is host QNN material laid out as ../shared/models/et-qnn-host
(docs/executorch-runner.md#model-folders).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from harness.suite import EXECUTORCH_QNN
from suites.support import suite_tests

if TYPE_CHECKING:
    from harness.lab.exports import ExportResult

SUITE = EXECUTORCH_QNN
globals().update(suite_tests(SUITE))


def test_export(declared_name: str, declared_reference: ExportResult | None) -> None:
    """The declared float reference (--reference-checkpoint ...), built as the night builds a plan
    build's `reference:`; collected only when one is declared (conftest.py)."""
    assert declared_reference is not None
    if not declared_reference.ok:
        pytest.fail(f"{declared_reference.reason()}\n{declared_reference.log_tail[-2000:]}", pytrace=False)
