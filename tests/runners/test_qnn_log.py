"""harness.qnn.log (old CLI path harness.runners.qnn_log) on real QNN logs: the ones captured
here (fixtures/qnn_logs, made on this host by fixtures/qnn_logs/make_logs.py, see its README) and ../shared's seed-v68 and abi logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.outcomes import FailureClass
from harness.qnn import FAILURE_CLASS, ArchCell, ArchTable, QnnFailure, classify_qnn_log, exit_status
from harness.qnn.log import main
from tests.shared import SHARED as SHARED_DIR

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "qnn_logs"
SHARED = SHARED_DIR / "models" / "et-qnn-host"

# name -> (failure, ops, arch, needed arch); None failure = clean
EXPECTED: dict[str, tuple[QnnFailure | None, tuple[str, ...], str | None, str | None]] = {
    "lower-matmul-16a8w-sa8295": (QnnFailure.OP_VALIDATION, ("matmul",), "v68", "v73"),
    "lower-layernorm-w4-16a4w-sa8295": (QnnFailure.OP_VALIDATION, ("native_layer_norm",), None, None),
    "lower-rmsnorm-16a8w-sa8295": (None, (), None, None),
    "lower-conv2d-16a8w-sa8295": (None, (), None, None),
    "lower-segv-decoder-16a8w-sm8650": (QnnFailure.BUILD_SEGFAULT, (), None, None),
    "lower-sigkill-decoder-16a8w-sm8650": (QnnFailure.OOM_KILLED, (), None, None),
    "lower-sdk-root-empty": (QnnFailure.MISSING_SDK, (), None, None),
    "lower-timeout-20s": (QnnFailure.TIMEOUT, (), None, None),
    "run-ok-sm8650": (None, (), None, None),
    "run-truncated-pte": (QnnFailure.CORRUPT_PTE, (), None, None),
    "run-corrupt-header-pte": (QnnFailure.CORRUPT_PTE, (), None, None),
    "run-corrupt-context-pte": (QnnFailure.CORRUPT_PTE, (), None, None),
    "ctx-newer-qairt-2.51-on-2.49": (QnnFailure.NEWER_CONTEXT_BINARY, (), None, None),
    "ctx-same-qairt-2.49": (None, (), None, None),
}


def _fixture(name: str) -> str:
    return (FIXTURES / f"{name}.log").read_text(encoding="utf-8")


def test_every_fixture_is_expected() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_verdict(name: str) -> None:
    failure, ops, arch, need = EXPECTED[name]
    v = classify_qnn_log(_fixture(name), table=None)
    assert v.decidable, v.message
    assert (v.failure, v.ops, v.arch, v.needed_arch) == (failure, ops, arch, need), v.message
    assert exit_status(v) == (1 if failure else 0)
    if failure is not None:
        assert v.to_json()["class"] == FAILURE_CLASS[failure].value
        assert v.last_lines, "a failure shows QNN's lines"


def test_signals_carry_the_signal_and_the_last_qnn_lines() -> None:
    segv = classify_qnn_log(_fixture("lower-segv-decoder-16a8w-sm8650"))
    assert segv.signal == 11 and "SIGSEGV" in segv.message and "lowering" in segv.message
    assert any("Qnn" in ln or "stage" in ln for ln in segv.last_lines)
    assert classify_qnn_log(_fixture("lower-sigkill-decoder-16a8w-sm8650")).signal == 9
    # SIGABRT after ExecuTorch logged its cause: the cause is the verdict, the signal kept
    abort = classify_qnn_log(_fixture("lower-sdk-root-empty"))
    assert abort.signal == 6 and "libQnnHtp.so" in abort.message


def test_message_names_ops_and_arches() -> None:
    v = classify_qnn_log(_fixture("lower-matmul-16a8w-sa8295"))
    assert "matmul" in v.message and "v68" in v.message and "v73" in v.message
    assert v.nodes == ("aten_matmul_default",)


def test_builds_instead_reads_the_given_table() -> None:
    cells = (ArchCell("matmul", "8a8w", "v68", "SA8295", True), ArchCell("matmul", "16a8w", "v68", "SA8295", False),
             ArchCell("matmul", "16a8w", "v73", "SM8550", True))
    v = classify_qnn_log(_fixture("lower-matmul-16a8w-sa8295"), table=ArchTable("2.49.40", "1.5.1", cells, Path("t")))
    assert v.builds_instead == "8a8w"
    assert "8a8w" in v.message and "QAIRT 2.49.40" in v.message


def test_exit_code_argument_overrides_the_trailer() -> None:
    text = _fixture("run-ok-sm8650")
    assert classify_qnn_log(text).failure is None
    crashed = classify_qnn_log(text, exit_code=-11)
    assert crashed.failure is QnnFailure.RUN_CRASH and crashed.signal == 11


def test_undecidable_logs() -> None:
    assert not classify_qnn_log("").decidable
    no_code = classify_qnn_log(_fixture("run-ok-sm8650").replace("[exit code: 0]", ""))
    assert not no_code.decidable and no_code.failure is None
    odd = classify_qnn_log("something went wrong\n", exit_code=3)
    assert not odd.decidable and exit_status(odd) == 2
    assert not classify_qnn_log("hello\n", exit_code=0).decidable  # no QNN line: not a QNN log


def test_every_failure_has_a_record_class() -> None:
    assert set(FAILURE_CLASS) == set(QnnFailure)
    assert all(isinstance(c, FailureClass) for c in FAILURE_CLASS.values())


def test_cli_json_and_exit_codes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main([str(FIXTURES / "lower-matmul-16a8w-sa8295.log"), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["class"], out["ops"], out["arch"], out["needed_arch"]) == ("qnn-op-unsupported", ["matmul"], "v68", "v73")
    assert main([str(FIXTURES / "run-ok-sm8650.log"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["class"] == "ok"
    odd = tmp_path / "odd.log"
    odd.write_text("no qnn here\n")
    assert main([str(odd), "--exit-code", "1"]) == 2
    assert "undecidable" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.log")]) == 2
    assert "missing.log" in capsys.readouterr().err


def test_cli_as_a_module() -> None:
    p = subprocess.run([sys.executable, "-m", "harness.runners.qnn_log", str(FIXTURES / "run-truncated-pte.log")],
                       capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 1 and p.stdout.startswith("init-error:")


# ---- ../shared's logs (the issue author's) ----------------------------------------------------
def _shared(rel: str) -> str:
    path = SHARED / rel
    if not path.is_file():
        pytest.skip(f"{path} is absent: ../shared/models/et-qnn-host holds the seed-v68 and abi logs")
    return path.read_text(encoding="utf-8")


def test_seed_v68_decoder_log() -> None:
    v = classify_qnn_log(_shared("seed-v68/ln-16a4w-ln16a16w-sa8295.log"))
    assert v.failure is QnnFailure.OP_VALIDATION
    assert v.ops == ("native_layer_norm", "matmul")
    assert (v.arch, v.needed_arch) == ("v68", "v73")
    assert "aten_native_layer_norm_default_4" in v.nodes and "aten_matmul_default_3" in v.nodes
    assert v.exit_code == 1


def test_seed_v68_probe_log() -> None:
    v = classify_qnn_log(_shared("seed-v68/lnprobe-16a4w-sa8295.log"))
    assert (v.failure, v.ops, v.arch, v.needed_arch) == (QnnFailure.OP_VALIDATION, ("native_layer_norm",), "v68", "v73")


@pytest.mark.parametrize("log", ["lower-qairt-2.48.40", "lower-qairt-2.50.40", "lower-qairt-2.51.0",
                                 "run-qairt-2.48.40", "run-qairt-2.50.40", "run-qairt-2.51.0"])
def test_abi_logs(log: str) -> None:
    v = classify_qnn_log(_shared(f"abi/{log}.log"))
    assert v.failure is QnnFailure.DEVICE_CONFIG_ABI
    assert v.to_json()["class"] == "qnn-version-mismatch"
    assert "2.49.40" in v.message


def test_undelegated_ops_line_alone() -> None:
    """The matmul log without QNN's validator lines: only ExecuTorch's 'not decomposed or delegated'."""
    text = "\n".join(ln for ln in _fixture("lower-matmul-16a8w-sa8295").splitlines() if "<E>" not in ln)
    v = classify_qnn_log(text)
    assert v.failure is QnnFailure.UNDELEGATED_OPS
    assert v.ops == ("aten.matmul.default",) and v.nodes == ("aten_matmul_default",)
