"""A night on the virtual lab whose runtime holds llm_logits_diff: the device whose export has
the activation-saturation scenario on its QNN LLM is failed by teacher-forced agreement with
the CPU reference (and its fluent wrong answer is shown as drift with both texts); the device
with a healthy export passes, its QNN pair differing from CPU only a little. JUnit, SQLite and
HTML carry the comparison."""

from __future__ import annotations

import pytest
import yaml
from junitparser import JUnitXml

from harness.evidence import TextAgreement
from harness.lab import jobs, run_night
from harness.lab.plan import load_plan
from harness.report import History

pytestmark = pytest.mark.slow

HEALTHY, SATURATED = "oneplus13", "sm8650-qrd"


def test_saturation_is_failed_by_teacher_forced_agreement_and_a_healthy_export_passes(vlab, tmp_path):
    from virtual_lab.exports import make_qwen3_export

    inv = vlab.inventory
    for name, scenario in ((HEALTHY, "healthy"), (SATURATED, "activation_saturation")):
        d = inv.get(name)
        make_qwen3_export(tmp_path / "exports" / name, soc_id=d.soc_id, dsp_arch=d.htp_arch, vtcm_mb=d.vtcm_mb,
                          size_mb=1, scenario=scenario)
        vlab.runtime_dir(d.htp_arch)
    plan_path = tmp_path / "nightly.yaml"
    plan_path.write_text(yaml.safe_dump({
        "name": "tf-night", "devices": [HEALTHY, SATURATED],
        "models": {"qwen3": {"path": "exports/{device}"}},
        "suites": [{"name": "matrix", "runner": "llm_demo", "models": ["qwen3"], "backends": ["qnn", "cpu"]}],
        "options": {"runtime_dir": str(vlab.root / "runtimes" / "mnn-{htp_arch}"), "qnn_sdk": str(vlab.qnn_sdk_dir),
                    "max_new_tokens": 24, "timeout_s": 120},
        "health": {"min_free_mb": 1},
        "locks": {"dir": "locks", "wait_s": 5},
        "recovery": {"reconnect_s": 2, "max_faults": 2},
    }))
    night = run_night(load_plan(plan_path), inv, tmp_path / "out", jobs.suite_job)
    recs = {(r.device, r.backend_pair, r.name.removesuffix("]").rsplit("-", 1)[-1]): r for r in night.records()
            if r.name.startswith("test_generation[")}
    details = [(k, r.status, r.failure_class, r.message[:300]) for k, r in recs.items()]
    exports = {r.device: r for r in night.records() if r.name == "test_export_verdict"}

    # Healthy: every record passes, the export's verdict too; the QNN pair was compared
    # teacher-forced and differs a little.
    healthy = {k: r for k, r in recs.items() if k[0] == HEALTHY}
    assert len(healthy) == 4 and all(r.status == "passed" for r in healthy.values()), details
    assert exports[HEALTHY].status == "passed", exports[HEALTHY].message
    verdict = exports[HEALTHY].to_dict()["extras"]["export_verdict"]
    assert verdict["verdict"] == "pass" and [ln["instrument"] for ln in verdict["lines"]] == [
        "static-quant", "teacher-forced", "text-coherence"], verdict
    assert verdict["lines"][1]["figures"]["median_kl"] < 0.05 and verdict["lines"][1]["pair"] == "qnn"
    for case in ("france", "cat"):
        tf = healthy[(HEALTHY, "qnn", case)].to_dict()["extras"]["teacher_forced"]
        assert tf["verdict"] == "agree" and tf["a"] == "cpu" and tf["b"] == "qnn", tf
        assert 0 < tf["mean_kl"] < 0.05 and tf["disagreements"] == 0 and tf["counted_steps"] > 5
        assert "teacher_forced" not in healthy[(HEALTHY, "cpu", case)].to_dict()["extras"]  # the reference itself

    # Saturated: every prompt's comparison disagrees, naming where B departs (evidence on each
    # record; the records fail on their wrong answers), and the export's verdict over all its
    # prompts fails on the consistent shift, one line per instrument.
    for case in ("france", "cat"):
        r = recs[(SATURATED, "qnn", case)]
        assert r.status == "failed" and r.failure_class == "drift", details
        tf = r.to_dict()["extras"]["teacher_forced"]
        assert tf["verdict"] == "disagree" and tf["mean_kl"] > 1 and tf["nll_gap"] > 1
        assert tf["first_disagreement"] is not None and tf["context"]["token"]
    export = exports[SATURATED]
    # The cause decides it (the quant check ran before the claim), the logits line agrees.
    assert export.status == "failed" and export.failure_class == "quant-metadata", details
    lines = export.message.splitlines()
    tf_line = next(ln for ln in lines if ln.startswith("teacher-forced qnn:"))
    assert lines[0].startswith("static-quant: fail") and "blocks 0-27" in export.message
    assert tf_line.startswith("teacher-forced qnn: fail: disagree") and "median mean KL" in tf_line
    assert any(ln.startswith("text-coherence:") for ln in lines)
    france = recs[(SATURATED, "qnn", "france")]
    assert france.text == "The capital of France is France."
    # ... and the fluent wrong answer is drift against the CPU answer, both texts kept.
    ag = france.evidence.get(TextAgreement)
    assert ag is not None and ag.level == "drift" and ag.reference == "The capital of France is Paris."
    assert all(recs[(SATURATED, "cpu", c)].status == "passed" for c in ("france", "cat"))

    # The cause, read before any device time: the saturated export's llm.mnn copies the `up`
    # operand's range onto every MLP Mul (harness/checks/quant); the healthy one passes.
    quant = {r.device: r for r in night.records() if r.name == "test_quant_metadata"}
    assert quant[HEALTHY].status == "passed", quant[HEALTHY].message
    assert quant[SATURATED].status == "failed" and quant[SATURATED].failure_class == "quant-metadata"
    assert "inherited from an operand in 28 of 28 blocks (blocks 0-27)" in quant[SATURATED].message
    assert "before any device was claimed" in quant[SATURATED].message

    # JUnit properties carry the comparison.
    xml = JUnitXml.fromfile(str(night.reports["junit"]))
    props = {}
    for suite in xml:
        for case in suite:
            holder = case._elem.find("properties")
            if holder is not None:
                props[(suite.name, case.name)] = {p.get("name"): p.get("value") for p in holder}
    sat = next(v for (s, n), v in props.items() if s == SATURATED and "[qnn-france]" in n)
    assert sat["teacher_forced"] == "disagree" and sat["teacher_forced_pair"] == "qnn vs cpu"
    assert float(sat["teacher_forced_mean_kl"]) > 1 and sat["teacher_forced_first_disagreement"]
    ok = next(v for (s, n), v in props.items() if s == HEALTHY and "[qnn-france]" in n)
    assert ok["teacher_forced"] == "agree" and ok["teacher_forced_disagreements"].startswith("0/")

    # SQLite: per-key teacher-forced metrics for the trend check.
    with History(night.reports["history"]) as h:
        rows = {(r.device, r.backend_pair): r for r in h.results([night.run_id])}
    assert rows[(SATURATED, "qnn")].number("tf_mean_kl") > 1 and rows[(SATURATED, "qnn")].failure_classes == ("drift",)
    assert "quant-metadata" in rows[(SATURATED, None)].failure_classes and rows[(SATURATED, None)].number("tf_mean_kl") > 1
    assert (rows[(SATURATED, None)].number("tf_worst_kl") or 0) > 1 and (rows[(HEALTHY, None)].number("tf_worst_kl") or 1) < 0.05
    assert rows[(SATURATED, None)].text("export_verdict") == "fail" and rows[(HEALTHY, None)].text("export_verdict") == "pass"
    assert 0 < rows[(HEALTHY, "qnn")].number("tf_mean_kl") < 0.05 and rows[(HEALTHY, "cpu")].number("tf_mean_kl") is None

    # HTML: where B departs from A.
    page = night.reports["html"].read_text()
    assert 'id="departures"' in page and "<mark>" in page and "teacher-forced: disagree" in page
    # ... and each export's verdict, a line per instrument.
    assert 'id="exports"' in page and "teacher-forced qnn: fail: disagree" in page and "text-coherence:" in page

    # JUnit: the export's testcase carries its verdict and one property per instrument.
    ev = next(v for (s, n), v in props.items() if s == SATURATED and n.endswith("test_export_verdict"))
    assert ev["export_verdict"] == "fail" and ev["export_teacher_forced_qnn"].startswith("fail: disagree")
    assert ev["export_static_quant"].startswith("fail") and float(ev["export_tf_median_kl"]) > 1
