"""The export's verdict in the reports: its record's JUnit properties (one per instrument and the
teacher-forced figures), the HTML report's export table, and the SQLite history, where the
medians and the worst KL over the export's prompts are kept per night and a rise across
nights, or a verdict worse than on every past night, is a regression."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness import pipeline
from harness.pairs import BackendPair
from harness.report import History, TestRecord, aggregate, junit_document, render_html


def _night(kls: list[float], run_id: str = "n1") -> list[TestRecord]:
    """One device's matrix (cpu reference + qnn, one prompt per KL) and the export's record."""
    recs = []
    for i, kl in enumerate(kls):
        recs.append(TestRecord(name=f"m::cpu::p{i}", suite="m", device="phone", model="smol",
                               backend_pair=BackendPair.parse("cpu"),
                               verdict="coherent", extras={"run_id": run_id}))
        flips = 32 if kl > 1 else 2
        recs.append(TestRecord(name=f"m::qnn::p{i}", suite="m", device="phone", model="smol",
                               backend_pair=BackendPair.parse("qnn"),
                               verdict="coherent", extras={"run_id": run_id, "teacher_forced": {
                                   "verdict": "disagree" if kl > 1 else "agree", "a": "cpu", "b": "qnn",
                                   "mean_kl": kl, "nll_gap": kl, "kl_used": True, "disagreements": flips,
                                   "counted_steps": 32}}))
    verdict = pipeline.export_verdict_of(recs)
    assert verdict is not None
    export = TestRecord(name="test_export_verdict", suite="m", device="phone", model="smol",
                        extras={"run_id": run_id, "export_verdict": verdict.to_json()})
    export.set_verdict(verdict.record_verdict())
    return [*recs, export]


def test_the_export_record_carries_its_instruments_into_junit():
    xml = ET.fromstring(junit_document(_night([0.04, 0.05, 16.0])).encode())
    case = next(c for c in xml.iter("testcase") if c.get("name") == "test_export_verdict")
    props = {p.get("name"): p.get("value") for p in case.find("properties")}
    assert props["export_verdict"] == "pass"
    assert props["export_teacher_forced_qnn"].startswith("pass: agree") and "odd prompt(s), not a shift: p2" in \
        props["export_teacher_forced_qnn"]
    assert props["export_static_quant"].startswith("not-run") and props["export_text_coherence"].startswith("pass")
    assert props["export_tf_median_kl"] == "0.05" and props["export_tf_worst_kl"] == "16"
    assert case.find("failure") is None


def test_a_failing_export_is_a_failing_testcase_and_a_table_row_in_html():
    recs = _night([15.0, 16.0, 0.05])
    xml = ET.fromstring(junit_document(recs).encode())
    case = next(c for c in xml.iter("testcase") if c.get("name") == "test_export_verdict")
    assert case.find("failure").get("type") == "logits-disagree"
    page = render_html(recs, title="t")
    assert 'id="exports"' in page and "teacher-forced qnn: fail: disagree" in page
    assert "static-quant: not-run" in page


def test_the_history_keeps_the_exports_figures_per_night():
    rows = {(r["device"], r["backend_pair"]): r for r in aggregate(_night([0.04, 0.05, 0.09]))}
    row = rows[("phone", "")]
    assert row["export_verdict"] == "pass" and row["tf_mean_kl"] == 0.05 and row["tf_worst_kl"] == 0.09
    assert row["tf_disagree_rate"] == 2 / 32
    assert rows[("phone", "qnn")]["tf_worst_kl"] == 0.09 and rows[("phone", "qnn")]["export_verdict"] is None


def test_a_rise_of_the_exports_median_across_nights_is_a_regression(tmp_path):
    with History(tmp_path / "h.sqlite") as h:
        for i in range(4):
            h.add_night(f"n{i}", _night([0.04, 0.05, 0.06], f"n{i}"), started_at=1000.0 + i)
        h.add_night("tonight", _night([0.07, 0.08, 0.1], "tonight"), started_at=2000.0)  # still agree
        regs = [r for r in h.regressions("tonight") if (r.device, r.backend_pair) == ("phone", None)]
        assert {r.metric for r in regs if r.kind == "agreement"} >= {"tf_mean_kl", "tf_worst_kl"}
        steady = History(tmp_path / "steady.sqlite")
        for i in range(5):
            steady.add_night(f"n{i}", _night([0.04, 0.05, 0.06], f"n{i}"), started_at=1000.0 + i)
        assert not steady.regressions("n4")
        steady.close()


def test_an_export_verdict_worse_than_every_past_night_is_a_regression(tmp_path):
    with History(tmp_path / "h.sqlite") as h:
        for i in range(3):
            h.add_night(f"n{i}", _night([0.04, 0.05, 0.06], f"n{i}"), started_at=1000.0 + i)
        h.add_night("tonight", _night([15.0, 16.0, 0.05], "tonight"), started_at=2000.0)
        regs = {r.kind: r for r in h.regressions("tonight") if (r.device, r.backend_pair) == ("phone", None)}
        assert regs["export-verdict"].metric == "pass -> fail"
        assert "went pass -> fail" in regs["export-verdict"].describe()
        assert regs["new-failure"].metric == "logits-disagree"
