"""The QNN view of real ETDumps of a QNN run on the host's HTP emulator (../shared's et-qnn-host
etdump/, copied to fixtures/executorch/qnn/ with the ETRecord's node map; see its README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.evidence import QnnProfile
from harness.report import TestRecord, qnn_profiles, render_html
from harness.runners.executorch import QnnEtdump, analyse_qnn_etdump, executorch_available, graph_nodes_of, load_rows, qnn_view
from harness.runners.executorch.qnn_profile import main
from tests.shared import SHARED as SHARED_DIR

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "fixtures" / "executorch" / "qnn"
PROF2 = FIX / "qwen3-16a4w-sm8650-prof2.etdp"
PLAIN = FIX / "qwen3-16a4w-sm8650.etdp"
SHARED = SHARED_DIR / "models" / "et-qnn-host" / "etdump"

needs_et = pytest.mark.skipif(not executorch_available(), reason="ExecuTorch's Inspector: the `executorch` extra")


@pytest.fixture(scope="module")
def graph_nodes() -> dict[str, str]:
    return json.loads((FIX / "qwen3-16a4w-sm8650-prof2.graph_nodes.json").read_text())


@pytest.fixture(scope="module")
def prof2(graph_nodes: dict[str, str]) -> QnnEtdump:
    if not executorch_available():
        pytest.skip("ExecuTorch's Inspector: the `executorch` extra")
    return qnn_view(load_rows(PROF2, None, qnn=True), graph_nodes, clock="emulator")


def test_per_op_events_are_cycles_mapped_to_graph_nodes(prof2: QnnEtdump) -> None:
    ops = [e for e in prof2.ops if e.io is None]
    assert len(ops) == 131 and sum(1 for e in prof2.ops if e.io) == 2
    assert len(prof2.ops) + len(prof2.summary) == 140  # every delegated event of the dump
    rms = next(e for e in ops if e.node == "aten_rms_norm_default_1")
    assert rms.op == "aten.rms_norm.default" and rms.cycles == (573336.0,)
    assert prof2.mapped and all(n.startswith("aten__to_copy_default_") for n in prof2.unmapped)
    assert any(e.node is None for e in ops)  # QNN's own inserted ops (`OpId_17 (cycles)`)
    # the ops' cycles add up to QNN's own accelerator count
    acc = prof2.summary_value("Accelerator (execute) time", "cycles")
    assert acc == 9189003.0
    assert abs(sum(e.total for e in ops) - acc) / acc < 0.01


def test_summary_events_are_kept_apart_with_their_units(prof2: QnnEtdump) -> None:
    units = {(s.name, s.unit) for s in prof2.summary}
    assert ("Number of HVX threads used", "count") in units
    assert ("QNN (execute) time", "us") in units and ("Accelerator (execute) time", "cycles") in units
    assert not any(":OpId_" in s.name for s in prof2.summary)


def test_json_for_a_record(prof2: QnnEtdump) -> None:
    j = prof2.to_json()
    assert (j["unit"], j["unit_label"], j["runtime_unit"]) == ("cycles", "cycles, emulator", "ns")
    assert j["profiled"] and j["qnn_ops"] == 131 and j["cpu_ops"] == []
    assert list(j["by_op"])[0] == "aten.rms_norm.default"  # the norms cost most on this decoder
    assert len(j["delegate_calls"]) == 1
    assert prof2.evidence().to_json() == json.loads(json.dumps(j))  # its JSON is the view's, whole


@needs_et
def test_unprofiled_dump_has_only_the_delegate_call() -> None:
    view = qnn_view(load_rows(PLAIN, None, qnn=True))
    assert not view.profiled and view.summary == [] and len(view.delegate_calls) == 1
    assert "profile_level=2" in view.to_json()["note"]


def test_report_shows_cycles_labelled_emulator(prof2: QnnEtdump) -> None:
    rec = TestRecord("executorch_qnn::run[16a4w]", "executorch_qnn", "emu-sm8650", soc_model="SM8650",
                     htp_arch="v75")
    rec.put(prof2.evidence())
    assert qnn_profiles([rec])[0].unit == "cycles, emulator"
    page = render_html([rec], title="night")
    assert "QNN profiles" in page and "(cycles, emulator)" in page and "aten_rms_norm_default_1" in page
    assert "9189003 (cycles, emulator)" in page
    plain = TestRecord("t", "s", "d")
    assert "QNN profiles" not in render_html([plain], title="night") and plain.evidence.get(QnnProfile) is None


@needs_et
def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(PLAIN)]) == 0
    assert "no QNN per-op events" in capsys.readouterr().out
    assert main([str(FIX / "missing.etdp")]) == 2


def test_shared_etrecord_gives_the_fixture_node_map(graph_nodes: dict[str, str]) -> None:
    etrecord = SHARED / "qwen3-16a4w-sm8650-prof2.etrecord"
    if not etrecord.is_file() or not executorch_available():
        pytest.skip(f"{etrecord} (../shared) and the `executorch` extra are needed")
    assert graph_nodes_of(etrecord) == graph_nodes
    view = analyse_qnn_etdump(SHARED / "qwen3-16a4w-sm8650-prof2.etdp", etrecord, clock="emulator")
    assert len(view.ops) + len(view.summary) == 140


RT2 = FIX / "qwen3-16a4w-sm8650-rt2-x20.etdp"


@needs_et
def test_the_plain_program_profiled_at_run_time_has_every_op_per_call(graph_nodes: dict[str, str]) -> None:
    """`pte_runner --profile_level 2 --iterations 20` on the plain program (no profiled lowering):
    131 op events, 20 values each; the ops add up to the accelerator over the calls, and each op's
    kept cycles are its least call."""
    view = qnn_view(load_rows(RT2, None, qnn=True), graph_nodes, clock="emulator")
    ops = [e for e in view.ops if e.io is None]
    assert len(ops) == 131 and all(len(e.cycles) == 20 for e in ops)
    acc = view.summary_value("Accelerator (execute) time", "cycles")
    assert acc is not None and abs(sum(e.total for e in ops) - acc) / acc < 0.01
    kept = view.op_cycles("qwen3-16a4w-sm8650.pte", 2)
    assert (kept.program, kept.unit_label, kept.profile_level, len(kept.ops)) == (
        "qwen3-16a4w-sm8650.pte", "cycles, emulator", 2, 131)
    rms = next(e for e in ops if e.node == "aten_rms_norm_default_1")
    one = kept.by_node()["aten_rms_norm_default_1"]
    assert one.cycles == min(rms.cycles) < max(rms.cycles) and one.calls == 20 and one.op == "aten.rms_norm.default"


TWO_DELEGATES = FIX / "kv-16a8w-sm8650-two-delegates-rt2.etdp"


@needs_et
def test_a_program_of_two_delegates_sums_each_delegates_summary() -> None:
    """Each QNN delegate writes its own `Accelerator (execute) time`: the run's is their sum. The first
    alone (the small graph's 546,924 cycles) failed the runner-ready export's profile check, its ops
    and IO "not adding up" (522,720,796)."""
    view = qnn_view(load_rows(TWO_DELEGATES, None, qnn=True), clock="emulator")
    per_delegate = [sum(s.values) for s in view.summary if (s.name, s.unit) == ("Accelerator (execute) time", "cycles")]
    assert len(per_delegate) == 2 and per_delegate[0] == 546924
    assert view.summary_value("Accelerator (execute) time", "cycles") == sum(per_delegate) == sum(e.total for e in view.ops)
