"""MNN's own words on placement (harness/qnn/mnn_npu_log.py, docs/placement.md#mnns-own-words): the
run-time `MNN_QNN: Not registered type` / `Don't support type` lines and compilefornpu's convert
log become evidence; an op or sub-module MNN left on the CPU fails the QNN cell `cpu-fallback`
naming it and its reason, the per-module speeds are kept. On real material: the real NPU stub of
../shared/models/smollm2-qnn-stub-v79 (whose placement alone passes) with lines in MNN's exact
printf formats; the shared x86 MNN build has no QNN backend and prints none of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.evidence import MnnNpuLog
from harness.outcomes import FailureClass
from harness.pairs import BackendPair
from harness.qnn import convert_log_of, read_npu_log
from harness.report import TestRecord
from harness.suite.placement import judge_mnn_placement
from tests.qnn.test_stub_placement import _need
from tests.qnn.test_stub_placement import _overlay as stub_overlay
from tests.shared import shared_dir


def printf(fmt: str, *args: object) -> str:
    """MNN's printf format strings rendered as printf renders them (%d, %s, %f)."""
    return fmt % args  # noqa: UP031


MODELS = shared_dir() / "models"
CPU_EXPORT = MODELS / "smollm2-135m-instruct-mnn-npu16"
STUB = MODELS / "smollm2-qnn-stub-v79"
RUNTIME = shared_dir() / "runtimes" / "mnn-x86_64"
QNN = BackendPair.parse("qnn")

# compilefornpu's lines as printf writes them (tools/cpp/compilefornpu.cpp:1092, 1105, 1134, 1779).
CONVERT_LOG = "\n".join([
    "Convert for QNN, QualComn's NPU",
    printf("Start to Test speed for %d times", 20),
    printf("%s, Speed Compare: NPU: %f ms : CPU: %f ms", "qnn/graphllm0", 1.5, 6.25),
    printf("error = %f, max = %f for %s", 0.8125, 2.375, "qnn/graphllm1"),
    printf("Failed to compile: %s", "qnn/graphllm2"),
    printf("%s, Speed Compare: NPU: %f ms : CPU: %f ms", "qnn/graphllm3", 2.0, 5.5),
    printf("Total Speed Compare: NPU: %f ms : CPU: %f ms", 3.5, 11.75),
    "Write config to npu_postreat.json",
])
# QnnBackend::onCreate's lines (QNNBackend.cpp:1623, 1634), as llm_demo prints them, one twice.
RUN_OUTPUT = "\n".join([printf("MNN_QNN: Not registered type %d, %s.", 128, "/layers.0/mlp/Foo"),
                        printf("MNN_QNN: Don't support type %d.", 16), "The capital of France is Paris.",
                        printf("MNN_QNN: Not registered type %d, %s.", 128, "/layers.0/mlp/Foo")])


def _overlay(dst: Path) -> Path:
    """The SmolLM2 export with its real NPU stub as `qnn/llm.mnn` (symlinks: ../shared is only read)."""
    _need(STUB / "qnn" / "llm.mnn", CPU_EXPORT / "llm_config.json", CPU_EXPORT / "config.json")
    return stub_overlay(dst, STUB / "qnn" / "llm.mnn")


def _rec() -> TestRecord:
    return TestRecord(name="test_generation[qnn-france]", suite="smollm2", device="emu", soc_model="SM8750",
                      htp_arch="v79")


def test_the_lines_read_into_evidence(tmp_path: Path) -> None:
    log = tmp_path / "compilefornpu.log"
    log.write_text(CONVERT_LOG)
    found = read_npu_log(RUN_OUTPUT, log)
    assert [(f.stage, f.what, f.signature) for f in found.fallbacks] == [
        ("run", "/layers.0/mlp/Foo", "mnn-qnn-op-not-registered"), ("run", "type 16", "mnn-qnn-op-unsupported"),
        ("convert", "qnn/graphllm1", "mnn-npu-module-error"), ("convert", "qnn/graphllm2", "mnn-npu-compile-failed")]
    assert "largest error 0.812500 is over 0.1 of its largest value 2.375000" in found.fallbacks[2].reason
    assert [(s.module, s.npu_ms, s.cpu_ms) for s in found.speeds] == [("qnn/graphllm0", 1.5, 6.25),
                                                                       ("qnn/graphllm3", 2.0, 5.5)]
    assert (found.total_npu_ms, found.total_cpu_ms) == (3.5, 11.75)
    assert MnnNpuLog.of_json(json.loads(json.dumps(found.to_json()))) == found
    assert read_npu_log("The capital of France is Paris.", None) == MnnNpuLog(())


def test_the_convert_log_of_a_plan_build_and_of_a_users_export(tmp_path: Path) -> None:
    entry = tmp_path / "entries" / "k1"
    (entry / "out").mkdir(parents=True)
    (entry / "entry.json").write_text("{}")
    (entry / "export.log").write_text(CONVERT_LOG)
    night = tmp_path / "night" / "exports" / "smollm2" / "SM8750" / "qnn"
    night.parent.mkdir(parents=True)
    night.symlink_to(entry / "out")  # how a night lays its exports out (harness/lab/exports/stage.py)
    assert convert_log_of(night) == entry / "export.log"
    user = tmp_path / "user-export"
    user.mkdir()
    assert convert_log_of(user) is None
    (user / "compilefornpu.log").write_text(CONVERT_LOG)
    assert convert_log_of(user) == user / "compilefornpu.log"


def test_the_real_stub_with_mnns_fallback_lines_fails_cpu_fallback_naming_them(tmp_path: Path) -> None:
    export = _overlay(tmp_path / "exp")
    rec = _rec()
    assert judge_mnn_placement(export, QNN, "config_qnn.json", rec, "") is None  # the stub alone passes
    said = rec.evidence.get(MnnNpuLog)
    assert said is not None and said.fallbacks == () and said.convert_log == ""
    (tmp_path / "exp" / "compilefornpu.log").write_text(CONVERT_LOG)  # the user's copy beside the export
    rec = _rec()
    failed = judge_mnn_placement(export, QNN, "config_qnn.json", rec, RUN_OUTPUT)
    assert failed is not None and failed.failure_class is FailureClass.CPU_FALLBACK
    assert "MNN left work on the CPU: /layers.0/mlp/Foo (run: MNN's QNN backend has no kernel for op type 128" \
        in failed.message
    assert "qnn/graphllm1 (convert: compilefornpu kept it on the CPU: its NPU result's largest error" in failed.message
    assert "qnn/graphllm2 (convert: compilefornpu kept it on the CPU: the NPU run gave a different number" \
        in failed.message
    kept = rec.evidence.get(MnnNpuLog)
    assert kept is not None and len(kept.speeds) == 2 and kept.convert_log.endswith("compilefornpu.log")


def test_the_shared_x86_mnn_build_prints_none_of_these_lines() -> None:
    """Built without MNN_QNN (docs/placement.md): its libraries hold none of the format strings,
    so its real runs never print them; the tests above use MNN's formats rendered."""
    libs = [RUNTIME / n for n in ("libMNN.so", "libMNN_Express.so", "libllm.so", "llm_demo")]
    if not all(p.is_file() for p in libs):
        pytest.skip(f"{RUNTIME} is absent: the shared x86 MNN runtime")
    for lib in libs:
        data = lib.read_bytes()
        assert b"Not registered type" not in data and b"Speed Compare" not in data, lib
