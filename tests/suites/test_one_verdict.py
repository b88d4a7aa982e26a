"""The policy and the suite's generation check give the same verdict on a (pair, prompt): one
judged matrix (every kind of finding the policy knows) goes through the lab door's record
(`harness.suite.run_check` with the generation check, written as the night writes it:
tests/pipeline/cellkit.py) and through the pytest door (the same call, then the plugin's
pass/fail from the assertion and the warning it raises) and every record ends with the same
status, class, message and warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from harness import pipeline
from harness.checks import DriftWarning, mrope
from harness.outcomes import FailureClass, RecordWarning, Status
from harness.pairs import BackendPair
from harness.report import TestRecord
from harness.runners import Prompt, PromptCase
from harness.runners import logits_diff as ld
from harness.runners.llm_demo import LlmDemoResult, ProcessRun, analyse
from harness.suite import GENERATION, MATRIX, QWEN3_VL, Instance, MatrixInput, Suite, run_check
from tests.pipeline.cellkit import cell_record, cell_records


def check_generation(rec: TestRecord, runs: dict[BackendPair, pipeline.PairRun], j: pipeline.Judgement,
                     suite: Suite = MATRIX) -> None:
    """The generation testcase as suites/support.py runs it: run_check, then fail or warn."""
    model = type("Model", (), {"model_type": "qwen3_vl", "visual": True, "configs": {}})()
    inp = MatrixInput(model, runs, {(j.pair, j.case.id): j}, lambda _p: None)
    verdict = run_check(suite, GENERATION, Instance(j.pair, j.case.id), inp, rec)
    if verdict.status is not Status.PASSED:
        raise AssertionError(f"{j.pair} {j.case.id}: {verdict.failure_class}: {verdict.message}")
    if verdict.warn_with is not None:
        warnings.warn(verdict.warn_with, stacklevel=2)

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "logits_diff"
SUMMARY = ("\n#################################\nprompt tokens num = 18\ndecode tokens num = 8\n"
           "prefill time = 0.10 s\n decode time = 0.10 s\nprefill speed = 180.00 tok/s\n"
           " decode speed = 80.00 tok/s\n##################################\n")
FRANCE = PromptCase(Prompt("What is the capital of France? Answer briefly.", id="france"), ("Paris",))
CAT = PromptCase(Prompt("Describe a cat in two sentences.", id="cat"), ("cat", "cats"))
CASES = [FRANCE, CAT]
PARIS = "The capital of France is Paris."
CAT_TEXT = "A cat is a small furry animal with whiskers. Cats like to sleep in warm places."


def _tf(name: str) -> ld.DiffResult:
    res = ld.analyse((FIX / f"{name}.stdout").read_text())
    res.label_a, res.label_b = "cpu", "qnn"
    return res


def _proc(case: PromptCase, text: str, *, log: str = "") -> ProcessRun:
    stdout = f"config path is c.json\nprompt file is prompts.txt\n{log}{text}\n{SUMMARY}"
    parsed, cls = analyse(stdout, "", exit_code=0, prompts=[case.prompt.text])
    return ProcessRun(["llm_demo"], [case.prompt.text], stdout, "", None, 0, False, 0.2, parsed, cls)


def _pair(pair: str, france: str, cat: str, *, tf: list[ld.DiffResult | None] | None = None,
          log: str = "") -> pipeline.PairRun:
    procs = [_proc(FRANCE, france, log=log), _proc(CAT, cat)]
    return pipeline.PairRun(BackendPair.parse(pair), LlmDemoResult(procs, [p.parsed.prompts[0] for p in procs]),
                            teacher_forced=tf or [])


def _matrix() -> dict[BackendPair, pipeline.PairRun]:
    """CPU reference plus one pair per finding (QNN variants: the pair names only have to differ)."""
    transport = ld.analyse("", "", exit_code=None)  # what LogitsDiffRunner.run makes of a lost link
    transport.transport_error = "link to the device lost during llm_logits_diff"
    runs = {
        "cpu": _pair("cpu", PARIS, CAT_TEXT),
        "qnn:same": _pair("qnn:same", PARIS, CAT_TEXT),
        "qnn:wrong-answer": _pair("qnn:wrong-answer", "The capital of France is France.", CAT_TEXT),
        "qnn:other-answer": _pair("qnn:other-answer", "Cats sleep for most of the day and love warm places to rest.",
                              "Cats are independent pets that hunt mice and groom themselves for hours each day."),
        "qnn:garbled": _pair("qnn:garbled", PARIS, "the the the the the the the the the the the the the the the the"),
        "qnn:reworded": _pair("qnn:reworded", "Paris is the capital of France.", CAT_TEXT),
        "qnn:logits": _pair("qnn:logits", PARIS, CAT_TEXT, tf=[_tf("corrupted-weights"), _tf("one-token-chunks-cat")]),
        "qnn:link": _pair("qnn:link", PARIS, CAT_TEXT, tf=[transport, None]),
        "qnn:init": _pair("qnn:init", "", CAT_TEXT, log="LLM init error\n"),
    }
    return {run.pair: run for run in runs.values()}


def _suite_front_door(runs: dict[BackendPair, pipeline.PairRun],
                      j: pipeline.Judgement) -> tuple[TestRecord, bool]:
    """What `test_generation` and the plugin make of it: the record, and whether a DriftWarning came."""
    rec = TestRecord(name=f"test_generation[{j.pair}-{j.case.id}]", suite="suite", device="d")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_generation(rec, runs, j)  # the record holds the check's verdict: the plugin writes no other
        except AssertionError as exc:
            assert j.pair.name in str(exc) and rec.message in str(exc)
    return rec, any(issubclass(w.category, DriftWarning) for w in caught)


def _verdict(rec: TestRecord) -> tuple[str, str, str, str]:
    return rec.status, rec.failure_class or "", rec.message, str(rec.extras.get("warning", ""))


def test_the_lab_and_the_suites_give_the_same_verdict_on_every_cell() -> None:
    runs = _matrix()
    judged = pipeline.judge_matrix(runs, CASES)
    lab = cell_records(runs, judged, device="d")
    assert len(lab) == len(judged) == 2 * len(runs)
    for j in judged:
        suite, warned = _suite_front_door(runs, j)
        assert _verdict(suite) == _verdict(lab[(j.pair, j.case.id)]), (j.pair, j.case.id)
        assert warned == bool(suite.extras.get("warning")), (j.pair, j.case.id)
        assert suite.signature == lab[(j.pair, j.case.id)].signature

    # The matrix covers what the policy decides, so the comparison above is not vacuous.
    classes = {(str(p), c): _verdict(r)[1] or _verdict(r)[3] or "passed" for (p, c), r in lab.items()}
    assert classes[("qnn:same", "france")] == classes[("cpu", "cat")] == "passed"
    assert classes[("qnn:wrong-answer", "france")] == FailureClass.DRIFT
    assert classes[("qnn:other-answer", "france")] == FailureClass.GARBLED  # misses "Paris", off the prompt
    assert classes[("qnn:other-answer", "cat")] == FailureClass.DISAGREE  # fluent, a different answer altogether
    assert classes[("qnn:garbled", "cat")] == FailureClass.GARBLED
    assert classes[("qnn:reworded", "france")] == RecordWarning.DRIFT
    assert classes[("qnn:logits", "france")] == FailureClass.LOGITS_DISAGREE
    assert classes[("qnn:logits", "cat")] == RecordWarning.LOGITS_DRIFT
    assert classes[("qnn:link", "france")] == FailureClass.TRANSPORT_ERROR
    assert classes[("qnn:init", "france")] == FailureClass.INIT_ERROR


def test_a_cell_with_no_text_fails_on_both_front_doors() -> None:
    cpu = _pair("cpu", PARIS, CAT_TEXT)
    runs = {cpu.pair: cpu}
    j = pipeline.Judgement(cpu.pair, FRANCE, 0, None, None, None)
    lab = cell_record(runs, j, device="d")
    suite, _ = _suite_front_door(runs, j)
    assert _verdict(lab) == _verdict(suite)
    assert lab.status == "failed" and "no text was generated" in lab.message


def test_a_position_finding_fails_the_lab_cell_and_the_suites_position_test_not_twice() -> None:
    """suites/qwen3_vl reports positions in test_mrope_positions (per pair); its test_generation
    leaves them out and the lab's record of the cell names them: the same finding, one place each;
    the teacher-forced disagreement the position bug causes stays its consequence on both."""
    run = _pair("qnn", PARIS, CAT_TEXT, tf=[_tf("corrupted-weights"), None])
    run.position_findings = {"france": [mrope.position_finding(mrope.CHUNK_LOCAL_BUG, "chunk 1 restarts at 0", chunk=1)]}
    cpu = _pair("cpu", PARIS, CAT_TEXT)
    runs = {cpu.pair: cpu, run.pair: run}
    judged = [j for j in pipeline.judge_matrix(runs, CASES) if j.pair == run.pair]
    lab = list(cell_records(runs, judged, device="d").values())
    assert [(r.status, r.failure_class) for r in lab] == [("failed", FailureClass.MROPE_POSITIONS), ("passed", None)]
    for j in judged:
        rec = TestRecord(name="t", suite="s", device="d")
        check_generation(rec, runs, j, QWEN3_VL)  # passes: QWEN3_VL reports positions in test_mrope_positions
        assert rec.status == "passed" and rec.failure_class is None
    assert pipeline.decide(run, judged[0], checked_elsewhere={FailureClass.MROPE_POSITIONS}).deferred == "mrope-positions"
    with pytest.raises(AssertionError, match="chunk_local_bug"):  # what test_mrope_positions asserts
        mrope.assert_positions_ok(run.position_findings["france"])
