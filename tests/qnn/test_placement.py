"""Placement read from real programs (harness.qnn.placement): the shared KV program's one Cast
on the CPU (expected for a runner-ready LLM, not for a forward program), a real partially
delegated program (the relu left out of the partition, lowered once per session) failing
`cpu-fallback` with the op named, a fully delegated one passing with its placement and provenance in JUnit and history."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.evidence import PlacementEvidence, Provenance, Tier
from harness.outcomes import FailureClass, Status
from harness.qnn import PteError, read_placement
from harness.report import TestRecord, aggregate
from harness.report.junit import case_properties
from harness.runners.executorch import ArtifactKind
from harness.suite.executorch import EXPECTED_CPU_OPS, judge_placement
from harness.verdict import Verdict
from tests.qnn.conftest import RELU_ON_CPU
from tests.qnn.material import et_qnn_or_skip
from tests.shared import shared_dir
from virtual_lab.qnn_build import ProgramSpec

KV_CAST = "dim_order_ops::_to_dim_order_copy.out"


def _rec() -> TestRecord:
    return TestRecord(name="t", suite="executorch_qnn", device="emu", soc_model="SM8650", htp_arch="v75")


def test_the_kv_program_runs_one_cast_on_the_cpu() -> None:
    kv = et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte")
    placement = read_placement(kv)
    assert placement.delegate_calls() == {"QnnBackend": 2}
    assert placement.cpu_ops() == {KV_CAST: 1}
    assert [m.method for m in placement.methods] == ["forward"]  # constant methods place no work
    rec = _rec()
    assert judge_placement(kv, EXPECTED_CPU_OPS[ArtifactKind.LLM], rec) is None
    placed = rec.evidence.get(PlacementEvidence)
    assert placed is not None and placed.unexpected == {}
    # the same Cast in a forward program, where nothing is expected on the CPU, is a fallback
    failed = judge_placement(kv, EXPECTED_CPU_OPS[ArtifactKind.FORWARD], _rec())
    assert failed is not None and failed.failure_class is FailureClass.CPU_FALLBACK
    assert f"{KV_CAST} x1" in failed.message


def test_a_second_cast_is_beyond_the_allowance() -> None:
    placement = read_placement(et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte"))
    assert placement.unexpected({"dim_order_ops::_to_dim_order_copy": 0}) == {KV_CAST: 1}
    assert placement.unexpected({KV_CAST: 1}) == {}


def test_forward_programs_are_whole_on_the_npu() -> None:
    ptes = sorted(et_qnn_or_skip("pte").glob("*.pte"))
    assert ptes
    for pte in ptes:
        placement = read_placement(pte)
        assert placement.delegate_calls() == {"QnnBackend": 1} and placement.cpu_ops() == {}, pte.name


def test_a_cpu_program_is_refused_as_a_qnn_cell() -> None:
    xnn = shared_dir() / "models" / "et-tiny-llama-xnnpack" / "model.pte"
    if not xnn.is_file():
        pytest.skip(f"{xnn} is absent")
    failed = judge_placement(xnn, EXPECTED_CPU_OPS[ArtifactKind.EXPORT], _rec())
    assert failed is not None and failed.failure_class is FailureClass.CPU_FALLBACK
    assert "no QnnBackend delegate" in failed.message and "XnnpackBackend x9" in failed.message


def test_a_truncated_program_is_named(tmp_path: Path) -> None:
    kv = et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte")
    cut = tmp_path / "cut.pte"
    cut.write_bytes(kv.read_bytes()[:300])  # inside the flatbuffer (the segments follow it)
    with pytest.raises(PteError, match=str(cut)):
        read_placement(cut)


@pytest.mark.real_qnn
def test_a_partially_delegated_program_fails_cpu_fallback(tiny_qnn_programs: dict[ProgramSpec, Path]) -> None:
    partial = tiny_qnn_programs[RELU_ON_CPU]
    placement = read_placement(partial)
    assert placement.delegate_calls() == {"QnnBackend": 2}  # the relu splits the graph in two
    assert placement.cpu_ops() == {"aten::relu.out": 1}
    rec = _rec()
    failed = judge_placement(partial, EXPECTED_CPU_OPS[ArtifactKind.FORWARD], rec)
    assert failed is not None and failed.failure_class is FailureClass.CPU_FALLBACK
    assert "aten::relu.out x1" in failed.message
    rec.set_verdict(failed)
    assert case_properties(rec)["placement_unexpected_cpu_ops"] == "aten::relu.out x1"


def test_a_whole_program_passes_with_its_placement(tmp_path: Path) -> None:
    whole = tmp_path / "whole.pte"
    shutil.copyfile(et_qnn_or_skip("pte", "qwen3-8a8w-sm8650.pte"), whole)
    rec = _rec()
    assert judge_placement(whole, EXPECTED_CPU_OPS[ArtifactKind.FORWARD], rec) is None
    rec.put(Provenance(Tier.EMULATOR, "v2.49.40.250930", "ab" * 32, ("cd" * 32,)))
    rec.set_verdict(judge_placement(whole, {}, rec) or Verdict.passed())
    props = case_properties(rec)
    assert props["placement"] == "QnnBackend x1; nothing on the CPU"
    assert (props["tier"], props["qairt"], props["program_sha256"]) == ("emulator", "v2.49.40.250930", "ab" * 32)
    back = TestRecord.from_dict(rec.to_dict())
    assert back.evidence.get(PlacementEvidence) == rec.evidence.get(PlacementEvidence)
    assert back.to_json() == rec.to_json()
    row = aggregate([back])[0]
    assert (row["tier"], row["qairt"], row["program_sha256"]) == ("emulator", "v2.49.40.250930", "ab" * 32)
    assert back.status is Status.PASSED


def test_an_etdump_gives_each_side_its_share() -> None:
    from harness.runners.executorch import analyse_etdump, executorch_available
    from harness.suite.executorch.profile import _place

    if not executorch_available():
        pytest.skip("the ETDump's share needs ExecuTorch's Inspector (the optional `executorch` extra)")
    folder = et_qnn_or_skip("etdump")
    report = analyse_etdump(folder / "qwen3-16a4w-sm8650.etdp", None, qnn=True)
    rec = _rec()
    _place(folder / "qwen3-16a4w-sm8650-prof2.pte", report, rec)
    placed = rec.evidence.get(PlacementEvidence)
    assert placed is not None and placed.time_share == {"delegated": 1.0, "cpu": 0.0}
    assert case_properties(rec)["placement_time_share"] == "cpu 0.000, delegated 1.000"


@pytest.mark.real_qnn
def test_the_built_programs_carry_binaries_qnn_accepts(tiny_qnn_programs: dict[ProgramSpec, Path]) -> None:
    """The virtual lab's real material: each context binary of the programs the host QNN built
    reads back through QNN's own libQnnSystem.so with the SoC it was built for (SM8650: 57)."""
    from harness.qnn import read_context_binary
    from virtual_lab.qnn_build import context_binaries_of

    bins = context_binaries_of(tiny_qnn_programs[RELU_ON_CPU])
    assert len(bins) == 2  # one per partition: the relu splits the graph
    for path in bins:
        info = read_context_binary(path)
        assert (info.soc_model, info.dsp_arch) == (57, "v75") and info.qairt_build.startswith("v2.49"), path
        assert info.graphs and all(g.inputs and g.outputs for g in info.graphs)
