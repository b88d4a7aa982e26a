"""The program_size check's evidence (issue 43's newcomer task: an ExecuTorch check with its evidence
in JUnit, the page and the history, in five files, none of them a reporter): a real QNN program of
../shared weighed, its bytes and its QNN context binaries' share in each report; a CPU program holds
no QNN context binary."""

from __future__ import annotations

import pytest

from harness.evidence import ProgramSize
from harness.qnn import qnn_delegates
from harness.report import History, TestRecord, render_html
from harness.report.junit import case_properties
from harness.suite import EXECUTORCH_QNN
from tests.shared import SHARED

QNN_PTE = SHARED / "models" / "et-qnn-host" / "pte" / "qwen3-16a4w-sm8650.pte"
CPU_PTE = SHARED / "models" / "et-tiny-llama-xnnpack" / "model.pte"


def _weighed(pte) -> ProgramSize:
    delegates = qnn_delegates(pte)
    return ProgramSize(pte.name, pte.stat().st_size, sum(d.size for d in delegates), len(delegates))


def test_a_qnn_programs_weight_shows_in_junit_the_page_and_the_history(tmp_path) -> None:
    if not QNN_PTE.is_file():
        pytest.skip(f"{QNN_PTE} is absent: ../shared's host QNN material (set HARNESS_SHARED_DIR)")
    size = _weighed(QNN_PTE)
    assert size.qnn_binaries >= 1 and 0.5 < size.qnn_share <= 1.0, size  # a QNN program's weight is its binaries
    assert "program_size" in [c.name for c in EXECUTORCH_QNN.checks]
    from harness.pairs import BackendPair

    rec = TestRecord(name="emu::test_program_size[16a4w]", suite="executorch_qnn", device="emu", model="qwen3",
                     backend_pair=BackendPair.parse("qnn:16a4w"))
    rec.put(size)
    assert TestRecord.from_dict(rec.to_dict()).evidence.get(ProgramSize) == size  # the JSON line reads back
    props = case_properties(rec)
    assert props["program_bytes"] == str(QNN_PTE.stat().st_size) and props["program_qnn_binaries"] == str(size.qnn_binaries)
    assert f"{size.qnn_share:.0%} in {size.qnn_binaries} QNN context binar" in render_html([rec], title="t")
    with History(tmp_path / "h.sqlite") as h:
        h.add_night("n", [rec], started_at=1.0)
        (row,) = h.results()
    assert row.number("program_kib") == round(size.size / 1024, 1) and row.number("program_qnn_share") == round(size.qnn_share, 4)


def test_a_cpu_program_holds_no_qnn_context_binary() -> None:
    if not CPU_PTE.is_file():
        pytest.skip(f"{CPU_PTE} is absent: ../shared's XNNPACK export (set HARNESS_SHARED_DIR)")
    size = _weighed(CPU_PTE)
    assert size.qnn_binaries == 0 and size.qnn_bytes == 0 and "0% in 0 QNN context binaries" in size.describe()
