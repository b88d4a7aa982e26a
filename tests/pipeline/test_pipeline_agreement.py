"""The matrix records' verdicts from the CPU reference: a wrong fluent answer is drift with
both texts whatever the suite's expected words; a prompt's teacher-forced comparison warns
(drift, disagree: the export's verdict over all prompts decides) and an error is never agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import pipeline
from harness.evidence import TextAgreement
from harness.pairs import BackendPair
from harness.runners import Prompt, PromptCase
from harness.runners import logits_diff as ld
from harness.runners.llm_demo import LlmDemoResult, ProcessRun, analyse
from tests.pipeline.cellkit import cell_records

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "fixtures" / "logits_diff"
SUMMARY = ("\n#################################\nprompt tokens num = 18\ndecode tokens num = 8\n"
           "prefill time = 0.10 s\n decode time = 0.10 s\nprefill speed = 180.00 tok/s\n"
           " decode speed = 80.00 tok/s\n##################################\n")
FRANCE = Prompt("What is the capital of France? Answer briefly.", id="france")


def _run(pair: str, text: str, tf: ld.DiffResult | None = None) -> pipeline.PairRun:
    stdout = f"config path is c.json\nprompt file is prompts.txt\n{text}\n{SUMMARY}"
    parsed, cls = analyse(stdout, "", exit_code=0, prompts=[FRANCE.text])
    proc = ProcessRun(["llm_demo"], [FRANCE.text], stdout, "", None, 0, False, 0.2, parsed, cls)
    return pipeline.PairRun(BackendPair.parse(pair), LlmDemoResult([proc], parsed.prompts),
                            teacher_forced=[tf] if tf else [])


def _matrix(*runs: pipeline.PairRun) -> dict[BackendPair, pipeline.PairRun]:
    return {r.pair: r for r in runs}


def _records(qnn_text: str, expect: tuple[str, ...], tf: ld.DiffResult | None = None):
    runs = _matrix(_run("cpu", "The capital of France is Paris."), _run("qnn", qnn_text, tf))
    cases = [PromptCase(FRANCE, expect)]
    return {pair: rec for (pair, _), rec in cell_records(runs, pipeline.judge_matrix(runs, cases), device="d").items()}


@pytest.mark.parametrize("expect", [(), ("Paris",)])
def test_a_wrong_fluent_answer_is_drift_with_both_texts_whatever_the_expected_words(expect):
    rec = _records("The capital of France is France", expect)["qnn"]
    assert rec.status == "failed" and rec.failure_class == "drift", (rec.failure_class, rec.message)
    assert "'The capital of France is France'" in rec.message
    assert "'The capital of France is Paris.'" in rec.message and "'paris' -> 'france'" in rec.message
    ag = rec.evidence.get(TextAgreement)
    assert ag is not None and ag.level == "drift"


def test_the_same_answer_reworded_shorter_still_passes():
    recs = _records("The capital of France is Paris", ("Paris",))
    assert recs["qnn"].status == "passed" and recs["cpu"].status == "passed"


def test_the_reference_pair_keeps_its_own_expectation_check():
    runs = _matrix(_run("cpu", "The capital of France is Lyon."))
    cases = [PromptCase(FRANCE, ("Paris",))]
    rec = cell_records(runs, pipeline.judge_matrix(runs, cases), device="d")["cpu", "france"]
    assert rec.status == "failed" and rec.failure_class == "garbled"


def _tf(name: str, **chunks) -> ld.DiffResult:
    res = ld.analyse((FIX / f"{name}.stdout").read_text(), **chunks)
    res.label_a, res.label_b = "cpu", "qnn"
    return res


def test_one_prompt_disagreeing_warns_and_the_exports_verdict_fails_the_shift():
    """Teacher-forced disagreement on a prompt whose text is right: the prompt's record passes
    with the warning and keeps the evidence; the export's record, over all its prompts, fails."""
    recs = _records("The capital of France is Paris.", ("Paris",), _tf("corrupted-weights"))
    rec = recs["qnn"]
    assert rec.status == "passed" and rec.extras["warning"] == "logits-disagree"
    assert "first disagreement at step 0" in rec.message
    tf = rec.to_dict()["extras"]["teacher_forced"]
    assert tf["verdict"] == "disagree" and tf["a"] == "cpu" and tf["b"] == "qnn" and tf["rows_near"]
    made = pipeline.export_verdict_of(recs.values())
    assert made is not None
    export = made.record_verdict()
    assert export.status == "failed" and export.failure_class == "logits-disagree"
    assert export.message.splitlines()[1].startswith("teacher-forced qnn: fail: disagree")


def test_teacher_forced_agree_passes_and_drift_warns():
    ok = _records("The capital of France is Paris.", (), _tf("other-session-france"))["qnn"]
    assert ok.status == "passed" and ok.to_dict()["extras"]["teacher_forced"]["verdict"] == "agree"
    drift = _records("The capital of France is Paris.", (), _tf("one-token-chunks-cat"))["qnn"]
    assert drift.status == "passed" and drift.extras["warning"] == "logits-drift" and "KL" in drift.message


def test_teacher_forced_that_compared_nothing_fails_never_agrees():
    null = ld.analyse("prompt tokens: 18, max new tokens: 8\nforward returned null at step 0\n\n"
                      "summary: argmax disagreements=0, first at step -1, worst maxAbsDiff=0.00000\n")
    rec = _records("The capital of France is Paris.", (), null)["qnn"]
    assert rec.status == "failed" and rec.failure_class == "logits-diff-error"
    assert rec.to_dict()["extras"]["teacher_forced"]["verdict"] == "error"


def test_the_step0_note_reaches_the_record():
    rec = _records("The capital of France is Paris.", (), _tf("chunk128-long-prompt", chunk_a=4096, chunk_b=128))["qnn"]
    assert rec.status == "passed"
    assert "step 0 not counted" in rec.to_dict()["extras"]["teacher_forced"]["exclusion_note"]


def test_a_different_answer_altogether_fails_as_disagree_with_both_texts():
    rec = _records("Cats sleep for most of the day and love warm places to rest.", ())["qnn"]
    assert rec.status == "failed" and rec.failure_class == "disagree"
    assert "The capital of France is Paris." in rec.message and "Cats sleep" in rec.message


def test_an_answer_reading_back_the_exports_system_prompt_is_garbled_only_when_it_is_known():
    system = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    runs = _matrix(_run("cpu", "The capital of France is Paris."),
                   _run("qnn", "Paris is the capital. I am an assistant named SmolLM, trained by Hugging Face."))
    cases = [PromptCase(FRANCE, ("Paris",))]
    with_system = {j.pair: j for j in pipeline.judge_matrix(runs, cases, system=system)}
    assert not with_system["qnn"].verdict.coherent, with_system["qnn"].verdict.reasons
    assert with_system["cpu"].verdict.coherent
    # A run without the export's system prompt is still judged (by the other rules).
    assert {j.pair for j in pipeline.judge_matrix(runs, cases)} == {"cpu", "qnn"}
    without = {j.pair: j for j in pipeline.judge_matrix(runs, cases)}
    assert without["qnn"].verdict.coherent  # the leak is seen only through the system prompt
