"""MNN's lane of placement (harness.qnn.placement.read_stub_placement, harness/suite/placement.py)
on real material: the real NPU stub of ../shared/models/smollm2-qnn-stub-v79 (32 QNN Plugin ops,
the KV Attention per layer and the logits slice on the CPU, all expected), and the real SmolLM2
CPU export put in a QNN config's place and run by MNN's real llm_demo: it answers, prints no QNN
plugin line, and its generation cell fails `cpu-fallback` instead of passing as NPU work."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.evidence import PlacementEvidence, Provenance, Tier, parse_expected_cpu_ops, with_expected
from harness.outcomes import FailureClass
from harness.pairs import BackendPair
from harness.qnn import qnn_plugin_inits, read_stub_placement
from harness.report import TestRecord
from harness.report.junit import case_properties
from harness.suite.placement import judge_mnn_placement, stamp_mnn_provenance
from tests.shared import shared_dir

MODELS = shared_dir() / "models"
CPU_EXPORT = MODELS / "smollm2-135m-instruct-mnn-npu16"
STUB = MODELS / "smollm2-qnn-stub-v79"
RUNTIME = shared_dir() / "runtimes" / "mnn-x86_64"
QNN = BackendPair.parse("qnn")
QAIRT = "v2.49.40.260810104044"


def _need(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.skip(f"{p} is absent: this test reads the real MNN material of ../shared")
    from harness.suite.checks import converter_missing

    if converter_missing():
        pytest.skip(converter_missing() or "")


def _overlay(dst: Path, llm_mnn: Path) -> Path:
    """The SmolLM2 export with `config_qnn.json` running `qnn/llm.mnn` = `llm_mnn` (symlinks: the
    shared folders are only read)."""
    (dst / "qnn").mkdir(parents=True)
    for name in ("llm.mnn.weight", "embeddings_bf16.bin", "tokenizer.mtok", "llm_config.json"):
        (dst / name).symlink_to(CPU_EXPORT / name)
    (dst / "qnn" / "llm.mnn").symlink_to(llm_mnn)
    config = json.loads((CPU_EXPORT / "config.json").read_text())
    config.update(llm_model="qnn/llm.mnn", sampler_type="greedy")
    (dst / "config_qnn.json").write_text(json.dumps(config))
    return dst


def _rec() -> TestRecord:
    return TestRecord(name="test_generation[qnn-france]", suite="smollm2", device="emu", soc_model="SM8750",
                      htp_arch="v79")


def test_the_real_stub_runs_its_graphs_in_qnn_plugins() -> None:
    _need(STUB / "qnn" / "llm.mnn", CPU_EXPORT / "llm_config.json")
    placement = read_stub_placement(STUB / "qnn" / "llm.mnn", name="qnn/llm.mnn")
    assert placement.delegate_calls() == {"QNN": 32} and placement.on_npu
    assert placement.cpu_ops() == {"Attention": 30, "StridedSlice": 1}
    assert dict(placement.methods[0].bookkeeping) == {"Const": 1738, "Input": 4}


def test_the_stubs_cpu_ops_are_expected_and_one_more_is_a_fallback(tmp_path: Path) -> None:
    _need(STUB / "qnn" / "llm.mnn", CPU_EXPORT / "llm_config.json")
    export = _overlay(tmp_path / "exp", STUB / "qnn" / "llm.mnn")
    rec = _rec()
    assert judge_mnn_placement(export, QNN, "config_qnn.json", rec, "") is None
    placed = rec.evidence.get(PlacementEvidence)
    assert placed is not None and placed.expected == {"Attention": 30, "StridedSlice": 1} and placed.unexpected == {}
    assert placed.summary == "QNN x32; on the CPU: Attention x30, StridedSlice x1"
    assert placed.runtime_qnn_inits == 0
    # Its provenance: the door's tier with the runtime's QAIRT and the stub's sha256 (no binary here).
    rec.put(Provenance(Tier.NPU))
    stamp_mnn_provenance(rec, export, "config_qnn.json", QAIRT)
    sha = hashlib.sha256((STUB / "qnn" / "llm.mnn").read_bytes()).hexdigest()
    assert rec.evidence.get(Provenance) == Provenance(Tier.NPU, QAIRT, sha, ())
    # A user allowing one Attention fewer (a plan's expected_cpu_ops) sees the 30th named.
    failed = judge_mnn_placement(export, QNN, "config_qnn.json", _rec(), "", {"Attention": 29})
    assert failed is not None and failed.failure_class is FailureClass.CPU_FALLBACK
    assert "beyond those expected: Attention x1" in failed.message


PROMPT = "What is the capital of France?"


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The CPU export dressed as a QNN config, run once by the real llm_demo."""
    _need(CPU_EXPORT / "llm.mnn", RUNTIME / "llm_demo")
    tmp = tmp_path_factory.mktemp("cpu-as-qnn")
    export = _overlay(tmp / "exp", CPU_EXPORT / "llm.mnn")
    (tmp / "prompt.txt").write_text(PROMPT + "\n")
    run = subprocess.run([str(RUNTIME / "llm_demo"), str(export / "config_qnn.json"), str(tmp / "prompt.txt"), "8"],
                         capture_output=True, text=True, timeout=300, cwd=tmp,
                         env={**os.environ, "LD_LIBRARY_PATH": str(RUNTIME)})
    return export, run


def test_a_cpu_export_run_by_llm_demo_is_not_npu_placement(cpu_run) -> None:
    export, run = cpu_run
    assert BackendPair.of_config(json.loads((export / "config_qnn.json").read_text()), visual=False) == QNN
    assert run.returncode == 0 and "Paris" in run.stdout, run.stdout + run.stderr
    assert qnn_plugin_inits(run.stdout) == 0  # MNN's CPU backend alone: no QNN plugin kernel made
    rec = _rec()
    failed = judge_mnn_placement(export, QNN, "config_qnn.json", rec, run.stdout)
    assert failed is not None and failed.failure_class is FailureClass.CPU_FALLBACK
    assert "qnn/llm.mnn: no QNN Plugin op" in failed.message
    assert "llm_demo printed no QNN plugin init line" in failed.message
    rec.set_verdict(failed)
    props = case_properties(rec)
    assert props["placement"].startswith("no delegate; on the CPU: Attention x30, BinaryOp x726")
    assert props["placement_runtime_qnn_inits"] == "0"


def test_the_generation_cell_of_that_run_is_a_cpu_fallback(cpu_run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same real run through the generation check both doors call (MatrixInput, run_check):
    a coherent answer, yet the QNN cell fails `cpu-fallback`; without the mnn converter (an
    optional extra) the cell keeps its pass and says its placement was not read."""
    from harness import pipeline
    from harness.provision import ProvisionedModel
    from harness.runners import Prompt, PromptCase
    from harness.runners.llm_demo import LlmDemoResult, ProcessRun, analyse
    from harness.suite import GENERATION, MATRIX, Instance, MatrixInput, run_check

    export, run = cpu_run
    prompt = Prompt(PROMPT, id="france")
    parsed, cls = analyse(run.stdout, run.stderr, exit_code=run.returncode, prompts=[prompt.text])
    proc = ProcessRun(["llm_demo"], [prompt.text], run.stdout, run.stderr, None, run.returncode, False, 1.0,
                      parsed, cls)
    runs = {QNN: pipeline.PairRun(QNN, LlmDemoResult([proc], parsed.prompts))}
    (j,) = pipeline.judge_matrix(runs, [PromptCase(prompt, ("Paris",))])
    model = ProvisionedModel("host", "/models/exp", "mnn", "llama", configs={QNN: "config_qnn.json"})

    def cell() -> TestRecord:
        rec = _rec()
        rec.put(Provenance(Tier.NPU))
        inp = MatrixInput(model, runs, {(QNN, "france"): j}, lambda _p: None, export, None, QAIRT)
        run_check(MATRIX, GENERATION, Instance(QNN, "france"), inp, rec)
        return rec

    rec = cell()
    assert rec.failure_class is FailureClass.CPU_FALLBACK and "qnn/llm.mnn: no QNN Plugin op" in rec.message
    assert "Paris" in (rec.text or "")  # the answer was right: only where it ran fails it
    prov = rec.evidence.get(Provenance)
    assert prov is not None and prov.qairt == QAIRT and prov.program_sha256
    monkeypatch.setattr("harness.suite.checks.converter_missing", lambda: "no converter here")
    unread = cell()
    assert unread.status.value == "passed" and unread.evidence.get(PlacementEvidence) is None
    assert unread.to_dict()["extras"]["placement_unread"] == "no converter here"


def test_the_qnn_plugin_init_lines_are_counted_as_mnn_prints_them() -> None:
    # FUNC_PRINT(stateNumber) in QNNBackend.cpp's PluginExecuteRaw::init, MNN_PRINT's format
    # `#x "=%d in %s, %d \n"` (include/MNN/MNNDefine.h at 4d40bdbd), one per QNN Plugin op.
    out = "config path is c.json\n" + "stateNumber=0 in init, 1409 \n" * 32 + "prompt file is p.txt\n"
    assert qnn_plugin_inits(out) == 32
    assert qnn_plugin_inits("mSeqLen[i]=128 in init, 1355 \nstateNumber is 3\n") == 0


def test_expected_cpu_ops_are_read_strictly() -> None:
    assert parse_expected_cpu_ops("dim_order_ops::_to_dim_order_copy=2, Attention") == {
        "dim_order_ops::_to_dim_order_copy": 2, "Attention": 1}
    assert parse_expected_cpu_ops({"aten::relu.out": 0}) == {"aten::relu.out": 0}
    for bad, said in (("Attention=-1", "'-1'"), ({"Attention": True}, "True"), ({"a b": 1}, "'a b'"),
                      (["Attention"], "list")):
        with pytest.raises(ValueError, match=said):
            parse_expected_cpu_ops(bad)
    # a user's count wins for an op the suite allows too; the suite's others stay
    assert with_expected({"Attention": 30, "StridedSlice": 1}, {"Attention": 31}) == {"Attention": 31,
                                                                                    "StridedSlice": 1}
