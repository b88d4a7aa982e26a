"""Localization on a real lowering on the host: the example exporter's debug build of a 2-layer
SwiGLU decoder (SM8650, 16a8w), lowered once per test session, run on QAIRT's x86 HTP emulator with
an ETDump and a debug buffer, compared per op with ExecuTorch's Inspector and QNN's SQNR comparator.
Skips with the reason without the qnn extra (executorch + onnxruntime-qnn)."""

from __future__ import annotations

from pathlib import Path

import pytest
from localize_kit import host_env

from harness.checks.localize import DEBUG_OUTPUT, ETDUMP, DebugFiles, localize
from harness.evidence import Localization, Outcome
from harness.runners.executorch import run_debug_program

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.real_qnn, pytest.mark.slow]


@pytest.fixture(scope="session")
def healthy_run(localize_debug_export: Path, tmp_path_factory: pytest.TempPathFactory) -> DebugFiles:
    """One debug run of the session's real debug lowering (tests/conftest.py)."""
    return run_debug_program(DebugFiles(localize_debug_export), tmp_path_factory.mktemp("localize-run"), host_env())


@pytest.fixture(scope="session")
def healthy(healthy_run: DebugFiles) -> Localization:
    return localize(healthy_run)


def test_the_debug_run_writes_an_etdump_and_a_debug_buffer_sized_from_the_program(healthy_run: DebugFiles) -> None:
    assert healthy_run.path(ETDUMP).stat().st_size > 0
    assert 100_000 < healthy_run.path(DEBUG_OUTPUT).stat().st_size < 10_000_000


def test_qnn_tensors_are_dequantized_with_the_kept_encodings(healthy: Localization) -> None:
    """Without the encodings put back on the read-back ETRecord, QNN's uint16 outputs are compared
    raw and no op agrees; with them the ops before the first attention agree to > 60 dB."""
    result = healthy
    by_node = {o.node: o for o in result.ops}
    assert len(result.ops) > 50
    early = [by_node[n] for n in ("aten_add_tensor", "aten_linear_default")]
    assert all(o.sqnr_db > 60 and o.cosine > 0.9999 for o in early), early


def test_the_first_departure_is_the_first_op_under_the_threshold_with_its_clip(healthy: Localization) -> None:
    """Measured: the example decoder's softmax output range is calibrated by QNN's moving-average
    observer to [0, 0.456], and the debug step (position 0, one unmasked slot) needs 1.0: the
    first departure, with its clipped share; no later op is named instead."""
    result = healthy
    assert result.outcome is Outcome.DEPARTED and result.first is not None
    assert result.first.node == "aten__softmax_default" and result.first.layer == "layers.0"
    assert result.first.saturation > 0
    assert result.worst is not None and result.worst.index >= result.first.index
