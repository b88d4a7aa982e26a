"""An export's verdict over all its prompts: the teacher-forced medians decide (one odd prompt
is named, not failed; a consistent shift fails), one line per instrument (static quant,
teacher-forced per pair, text coherence, the fallback where no tool runs), and the record both
front doors make of it. Figures are the real ones of benchmarks/logits_diff_calibration.py
(docs/logits-diff.md#calibration-on-real-16-bit-noise)."""

from __future__ import annotations

import pytest

from harness import pipeline
from harness.checks import (
    PromptFigures,
    judge_export,
    static_quant_line,
    text_coherence_line,
    verdict_of_records,
)
from harness.checks.export_verdict import export_verdict  # not on the face: a submodule has its name
from harness.evidence import Instrument, LineVerdict, TeacherForced
from harness.outcomes import FailureClass, Status
from harness.pairs import BackendPair
from harness.report import TestRecord
from harness.verdict import Verdict


def _p(kl: float, flips: int, gap: float, verdict: str = "agree", counted: int = 32, name: str = "") -> PromptFigures:
    return PromptFigures(name, verdict, kl, gap, flips, counted)


# A healthy 16-bit export (calibrated fake-quant): KL 0.02-0.1, 0-8 of 32 steps flipped.
HEALTHY = [_p(0.02 + 0.002 * i, i % 9, 0.004 * i - 0.03) for i in range(36)]


def test_a_healthy_16bit_export_agrees_over_its_prompts():
    v = judge_export(HEALTHY, pair="qnn")
    assert v.verdict == "agree" and not v.odd_prompts and v.figures.compared == 36
    assert v.figures.median_kl == pytest.approx(0.054) and v.figures.worst_kl == pytest.approx(0.09)


def test_one_odd_prompt_is_named_not_failed():
    prompts = HEALTHY[:35] + [_p(15.8, 32, 16.0, "disagree", name="odd-one")]
    v = judge_export(prompts, pair="qnn")
    assert v.verdict == "agree" and v.odd_prompts == ("odd-one",)
    assert v.figures.worst_kl == pytest.approx(15.8)
    text = v.describe()
    assert "odd prompt(s), not a shift: odd-one" in text and text.startswith("teacher-forced qnn")


def test_one_odd_prompt_of_two_cannot_move_the_median():
    v = judge_export([_p(0.03, 1, 0.01), _p(15.0, 32, 16.0, "disagree", name="cat")])
    assert v.verdict == "agree" and v.odd_prompts == ("cat",)


def test_a_consistent_shift_disagrees_even_when_each_prompt_only_drifts():
    # sat_0-like: most prompts above the disagree line on the median.
    v = judge_export([_p(1.2 + 0.01 * i, 15, 1.5, "disagree" if i % 2 else "drift") for i in range(36)])
    assert v.verdict == "disagree" and any("median mean KL" in r for r in v.reasons)


def test_a_moderate_consistent_shift_drifts():
    # sat_2-like: median KL 0.37, flips ~25 %.
    v = judge_export([_p(0.3 + 0.004 * i, 8, 0.35, "drift") for i in range(36)])
    assert v.verdict == "drift" and not v.odd_prompts


def test_no_prompt_compared_is_an_error_not_agreement():
    v = judge_export([PromptFigures("a", "error", None, None, 0, 0)] * 3)
    assert v.verdict == "error" and "no prompt was compared" in v.reasons[0]


def test_figures_come_from_the_records_extras_and_unusable_kl_is_left_out():
    fig = PromptFigures.of_evidence(TeacherForced.of_json({"verdict": "agree", "mean_kl": 0.85, "nll_gap": 1.1,
                                                           "kl_used": False, "disagreements": 0, "counted_steps": 11}))
    assert fig.mean_kl is None and fig.nll_gap is None and fig.flip_share == 0


def test_the_lines_come_in_instrument_order_and_the_first_failing_names_the_class():
    tf = judge_export([_p(15, 32, 16, "disagree")] * 3, pair="qnn")
    from harness.checks import teacher_forced_line
    v = export_verdict([text_coherence_line({"qnn": ["coherent"] * 3}, fallback=False), teacher_forced_line(tf),
                        static_quant_line(errors=["MLP Mul range inherited from an operand in 27 of 30 blocks"])])
    assert [ln.instrument for ln in v.lines] == [Instrument.STATIC_QUANT, Instrument.TEACHER_FORCED,
                                                 Instrument.TEXT_COHERENCE]
    assert v.verdict == LineVerdict.FAIL and v.failure_class == "quant-metadata"
    assert v.describe().splitlines()[1].startswith("teacher-forced qnn: fail: disagree")


def test_text_is_the_fallback_where_no_tool_runs_and_one_garbled_answer_only_warns():
    one = text_coherence_line({"qnn": ["coherent", "garbled", "coherent"]}, fallback=True)
    assert one.verdict == LineVerdict.WARN and "the fallback" in one.summary
    most = text_coherence_line({"qnn": ["garbled", "garbled", "coherent"], "cpu": ["coherent"] * 3}, fallback=True)
    assert most.verdict == LineVerdict.FAIL and most.failure_class == "garbled"


def _rec(pair: str, case: str, verdict: str = "coherent", tf: dict | None = None,
         skipped: bool = False) -> TestRecord:
    rec = TestRecord(name=f"s::{pair}::{case}", suite="s", device="d", backend_pair=BackendPair.parse(pair),
                     verdict=verdict)
    if skipped:
        rec.set_verdict(Verdict.skipped("not run"))
    if tf is not None:
        rec.put(TeacherForced.of_json(tf))
    return rec


def _tf(kl: float, flips: int, verdict: str) -> dict:
    return {"verdict": verdict, "mean_kl": kl, "nll_gap": kl, "kl_used": True, "disagreements": flips,
            "counted_steps": 32}


def test_the_export_record_from_the_cell_records_and_the_quant_record():
    recs = [_rec("cpu", "a"), _rec("cpu", "b"), _rec("cpu", "c"),
            _rec("qnn", "a", tf=_tf(15.0, 32, "disagree")), _rec("qnn", "b", tf=_tf(14.0, 32, "disagree")),
            _rec("qnn", "c", tf=_tf(0.05, 3, "agree")),
            TestRecord(name="s::quant", suite="s", device="d", extras={"instrument": "static-quant"})]
    recs[-1].set_verdict(Verdict.failed(FailureClass.QUANT_METADATA, "MLP Mul range inherited in blocks 0-29"))
    made = pipeline.export_verdict_of(recs)
    assert made is not None
    verdict = made.record_verdict()
    assert verdict.status is Status.FAILED and verdict.failure_class is FailureClass.QUANT_METADATA
    ev = made.to_json()
    assert [(ln["instrument"], ln["verdict"]) for ln in ev["lines"]] == [
        ("static-quant", "fail"), ("teacher-forced", "fail"), ("text-coherence", "pass")]
    assert ev["lines"][1]["figures"]["median_kl"] == 14.0 and ev["lines"][1]["figures"]["worst_kl"] == 15.0


def test_without_the_tool_the_teacher_forced_line_says_so_and_text_decides():
    recs = [_rec("cpu", "a"), _rec("qnn", "a", "garbled"), _rec("qnn", "b", "garbled"),
            _rec("qnn", "c", skipped=True)]
    v = verdict_of_records(recs, reference=BackendPair.parse("cpu"))
    assert v is not None
    assert [ln.verdict for ln in v.lines] == [LineVerdict.NOT_RUN, LineVerdict.NOT_RUN, LineVerdict.FAIL]
    assert "llm_logits_diff" in v.lines[1].summary and "the fallback" in v.lines[2].summary


def test_no_matrix_record_no_export_record():
    assert pipeline.export_verdict_of([_rec("qnn", "a", skipped=True)]) is None
