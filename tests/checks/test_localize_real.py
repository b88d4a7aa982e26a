"""Localization on real lowerings on the host: the example exporter's debug build of a 2-layer
SwiGLU decoder (SM8650, 16a8w), healthy and with the seed fault planted at layer 1 (the session's
shared lowerings, tests/conftest.py), each run on QAIRT's x86 HTP
emulator with an ETDump and a debug buffer, compared per op with ExecuTorch's Inspector and QNN's
SQNR comparator. Skips with the reason without the qnn extra (executorch + onnxruntime-qnn)."""

from __future__ import annotations

import json
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


@pytest.fixture(scope="session")
def faulty_run(localize_fault_export: Path, tmp_path_factory: pytest.TempPathFactory) -> DebugFiles:
    """The same program with the seed fault planted at layer 1 (its SwiGLU MUL's observer takes its
    SiLU operand's range; the session's lowering, tests/conftest.py)."""
    return run_debug_program(DebugFiles(localize_fault_export), tmp_path_factory.mktemp("localize-fault-run"), host_env())


@pytest.fixture(scope="session")
def faulty(faulty_run: DebugFiles) -> Localization:
    return localize(faulty_run)

def test_the_debug_run_writes_an_etdump_and_a_debug_buffer_sized_from_the_program(healthy_run: DebugFiles) -> None:
    assert healthy_run.path(ETDUMP).stat().st_size > 0
    assert 1_000_000 < healthy_run.path(DEBUG_OUTPUT).stat().st_size < 50_000_000


def test_qnn_tensors_are_dequantized_with_the_kept_encodings(healthy: Localization) -> None:
    """Without the encodings put back on the read-back ETRecord, QNN's uint16 outputs are compared
    raw and no op agrees; with them the ops before the first attention agree to > 60 dB."""
    result = healthy
    by_node = {o.node: o for o in result.ops}
    assert len(result.ops) > 50
    early = [by_node[n] for n in ("aten_add_tensor", "aten_linear_default")]
    assert all(o.sqnr_db > 60 and o.cosine > 0.9999 for o in early), early


def test_a_healthy_program_has_no_departure(healthy: Localization) -> None:
    """The debug forward is the prompt's first window as one prefill, calibrated (MinMax) over the
    same positions: no op of a faithful lowering falls under the format's threshold."""
    assert healthy.outcome is Outcome.NONE, healthy.summary()


def test_the_planted_fault_is_named_first_at_its_layer(faulty_run: DebugFiles, faulty: Localization) -> None:
    """The first op under the threshold in graph order is layer 1's SwiGLU MUL, with its clipped
    share; the ops after it (which the fault also spoils) follow it, not replace it."""
    planted = json.loads(faulty_run.path("qnn_encodings.json").read_text())["planted_fault"]
    assert faulty.outcome is Outcome.DEPARTED and faulty.first is not None, faulty.summary()
    assert (faulty.first.node, faulty.first.layer) == (planted, "layers.1"), faulty.summary()
    assert faulty.first.saturation > 0 and faulty.first.cosine < 0.99
    assert faulty.following and all(o.index > faulty.first.index for o in faulty.following)


def test_a_random_etdump_is_undecidable_and_the_answer_stays_json(healthy_run: DebugFiles, tmp_path: Path,
                                                                  capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 44.1: a damaged ETDump beside a real ETRecord read as "departed" (exit 1, a traceback), and
    ExecuTorch's flatc printed its error on stdout, so `--json` was not JSON."""
    import os
    import shutil

    from harness.checks.localize.cli import main

    for f in healthy_run.folder.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / ETDUMP).write_bytes(os.urandom(4096))
    code = main([str(tmp_path), "--json"])
    out = capfd.readouterr().out
    answer = json.loads(out)  # nothing else on stdout
    assert code == 2 and answer["outcome"] == "undecidable", answer
    assert "could not compare" in answer["reason"], answer
