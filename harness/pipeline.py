"""The device pipeline both front doors share: run llm_demo over the backend matrix of a
provisioned export, check what came out, and turn it into TestRecords.

    runner = LlmDemoRunner(transport, runtime, model)
    runs = run_matrix(runner, cases, pairs)            # one llm_demo process per prompt
    judged = judge_matrix(runs, cases)                 # coherence + agreement with CPU/CPU
    run_check(suite, GENERATION, Instance(pair, case), MatrixInput(...), rec)  # decide() into rec

When the pushed runtime holds MNN's `llm_logits_diff`, run_matrix also compares every pair
other than the CPU reference with it, teacher-forced (A = CPU reference, B = the pair), per
prompt; `export_verdict_of` judges those over all prompts of the export, one line per
instrument (docs/logits-diff.md#the-exports-verdict-over-all-its-prompts).

Both front doors decide a (pair, prompt) with `decide`, through the suites' generation check
(harness/suite/checks.py, run by suites/support.py and harness/lab/jobs.py): the same verdict
by construction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.checks import Agreement, ExportVerdict, compare, mrope, verdict_of_records
from harness.checks.coherence import CoherenceKind, TextVerdict, judge
from harness.checks.shapes import scan_log_for_shape_errors
from harness.evidence import Agreement as AgreementWord
from harness.evidence import ExportVerdictEvidence, TextAgreement
from harness.findings import Finding, errors
from harness.outcomes import FailureClass, RecordWarning, Status
from harness.pairs import BackendPair, reference_of
from harness.report import Detail, TestRecord
from harness.runners import POSDBG_ENV, Overlay, Prompt, PromptCase, image_grids, shows_b_images
from harness.runners.llm_demo import LlmDemoResult, LlmDemoRunner
from harness.runners.logits_diff import DiffResult, LogitsDiffRunner
from harness.verdict import Verdict


@dataclass
class PairRun:
    """One backend pair's llm_demo runs (a process per prompt) and the log checks."""

    pair: BackendPair
    result: LlmDemoResult
    # Shape/graph errors found in each process's log (stdout, stderr, logcat), in prompt order.
    process_shape_findings: list[list[Finding]] = field(default_factory=list)
    # None: the runtime printed no [POSDBG] lines (not instrumented); else per-prompt findings.
    position_findings: dict[str, list[Finding]] | None = None
    # Teacher-forced comparison with the CPU reference, per prompt; empty when not run (the
    # reference pair itself, or a runtime without llm_logits_diff).
    teacher_forced: list[DiffResult | None] = field(default_factory=list)
    # Prompts the teacher-forced comparison could not judge, with the reason (an image prompt
    # and a tool whose B never sees the image): "not checkable", never a verdict.
    teacher_forced_unchecked: dict[str, str] = field(default_factory=dict)

    @property
    def shape_findings(self) -> list[Finding]:
        return [f for found in self.process_shape_findings for f in found]


def position_findings_of(run: LlmDemoResult, cases: Sequence[PromptCase]) -> dict[str, list[Finding]] | None:
    """Per prompt, the `[POSDBG]` verdict's findings (harness.checks.mrope.judge_log, the CLI's
    too); None when no process printed a dump of a prompt (not an instrumented build). Findings
    of the kinds in mrope.UNCHECKED_KINDS say the dump could not decide, not that it failed."""
    found: dict[str, list[Finding]] = {}
    for proc, case in zip(run.runs, cases):
        text = f"{proc.stdout}\n{proc.logcat or ''}"
        prompt_len = proc.parsed.summary.prompt_tokens if proc.parsed.summary is not None else None
        verdict = mrope.judge_log(text, images=image_grids(case), prompt_len=prompt_len)
        if verdict.runs or any(f.kind == mrope.MALFORMED_DUMP for f in verdict.findings):
            found[case.id] = verdict.findings
    return found or None


def failing_positions(findings: Sequence[Finding] | None) -> list[Finding]:
    """The findings that fail a run (not those saying the dump could not decide)."""
    return [f for f in findings or () if f.kind not in mrope.UNCHECKED_KINDS]


def teacher_forced_runner(runner: LlmDemoRunner) -> LogitsDiffRunner | None:
    """A LogitsDiffRunner on the same device, runtime and model, when the runtime has the tool."""
    return LogitsDiffRunner.if_available(runner.transport, runner.runtime, runner.model)


def run_teacher_forced(tf: LogitsDiffRunner, case: PromptCase, pair: BackendPair, *, reference: BackendPair,
                       max_new_tokens: int = 64, timeout: float = 300.0,
                       extra_env: Mapping[str, str] | None = None) -> DiffResult:
    """A = the CPU reference, B = `pair`, one llm_logits_diff run, greedy."""
    greedy = Overlay(greedy=True)
    return tf.run(case.prompt, a=reference, b=pair, max_tokens=max_new_tokens, overlay_a=greedy, overlay_b=greedy,
                  timeout=timeout, extra_env=extra_env)


@dataclass
class ChunkedPrefill:
    """Chunked prefill against one chunk for one prompt: teacher-forced when the runtime has
    llm_logits_diff (A = one chunk, B = the compiled chunk), else greedy text compared; an image
    prompt with a tool whose B never sees the image is not checkable (`checkable` False)."""

    label: str
    method: str  # "teacher-forced" | "text" | "not checkable"
    equal: bool
    diff: DiffResult | None = None
    text: mrope.EquivalenceResult | None = None
    reason: str = ""  # why not checkable

    @property
    def checkable(self) -> bool:
        return self.method != "not checkable"

    def explain(self) -> str:
        if not self.checkable:
            return f"{self.label}: chunked prefill not checkable: {self.reason}"
        if self.diff is not None:
            return f"{self.label}: chunked prefill, {self.diff.describe()}"
        return self.text.explain() if self.text is not None else f"{self.label}: not compared"


def chunked_prefill_check(runner: LlmDemoRunner, prompts: Sequence[Prompt], *, backend: BackendPair, chunk: int = 128,
                          single: int | None = None, max_new_tokens: int = 32, timeout: float = 300.0,
                          extra_env: Mapping[str, str] | None = None) -> list[ChunkedPrefill]:
    """Does the output depend on the prefill chunk? Teacher-forced where the runtime holds
    llm_logits_diff: every step compares logits for the same history, so a fault shows at the
    step it happens (right after an image for chunk-local mRoPE positions or deepstack rows
    split across chunks), not only when it flips the greedy text. Step 0 is not counted (the
    chunked-forward artefact, docs/logits-diff.md). An image prompt is compared only by a tool
    that shows B the image (llm_logits_diff_vl, docs/logits-diff.md#vl-prompts); with the stock
    tool it is not checkable, with the reason. Without a tool: the greedy texts.
    `single`: the one-chunk side's chunk; None = the config's own (one forward for the prompt:
    a chunk padded far past the prompt is itself a padded chunk)."""
    one = Overlay(greedy=True, chunk_limits=(single, 1) if single else None)
    compiled = Overlay(greedy=True, chunk_limits=(chunk, 1))
    tf = teacher_forced_runner(runner)
    out: list[ChunkedPrefill] = []
    if tf is not None:
        for p in prompts:
            name = p.id or p.text[:32]
            if p.images and not shows_b_images(tf.tool_name):
                out.append(ChunkedPrefill(name, "not checkable", False, reason=(
                    f"an image prompt needs a tool that shows B the image (llm_logits_diff_vl); the "
                    f"runtime's {tf.tool_name} encodes the prompt for A only, so B never sees the image")))
                continue
            diff = tf.run(p, a=backend, b=backend, max_tokens=max_new_tokens, overlay_a=one, overlay_b=compiled,
                          timeout=timeout, extra_env=extra_env)
            diff.label_a, diff.label_b = f"{backend} one chunk ({single or 'config'})", f"{backend} chunk {chunk}"
            out.append(ChunkedPrefill(name, "teacher-forced", diff.verdict == "agree", diff=diff))
        return out
    chunked = runner.run(prompts, backend=backend, overlay=Overlay(max_new_tokens=max_new_tokens, chunk_limits=(chunk, 1)),
                         timeout=timeout, extra_env=extra_env)
    whole = runner.run(prompts, backend=backend, overlay=Overlay(max_new_tokens=max_new_tokens,
                       chunk_limits=(single, 1) if single else None), timeout=timeout, extra_env=extra_env)
    for p, a, b in zip(prompts, chunked.texts, whole.texts):
        res = mrope.chunked_equivalence(a or "", b or "", label=p.id or "")
        if not (chunked.ok and whole.ok):
            res = mrope.EquivalenceResult(False, p.id or "", f"runs failed: {chunked.failure_class} / "
                                          f"{whole.failure_class}")
        out.append(ChunkedPrefill(p.id or p.text[:32], "text", res.equal, text=res))
    return out


def run_matrix(runner: LlmDemoRunner, cases: Sequence[PromptCase], pairs: Iterable[BackendPair], *,
               max_new_tokens: int = 64, timeout: float = 300.0, overlay: Overlay | None = None,
               extra_env: Mapping[str, str] | None = None,
               teacher_forced: bool = True) -> dict[BackendPair, PairRun]:
    """Run every prompt on every pair, one llm_demo process per prompt (a failure in one
    prompt poisons the rest of its process,
    docs/llm-demo-output.md#one-error-poisons-the-process), and, when the runtime holds
    llm_logits_diff (and `teacher_forced`), the teacher-forced comparison of each pair other
    than the CPU reference against it. Never raises for a failing run."""
    overlay = overlay or Overlay(greedy=True, max_new_tokens=max_new_tokens)
    extra_env = {**POSDBG_ENV, **(dict(extra_env) if extra_env else {})}  # the dump on, for the positions check
    prompts = [c.prompt for c in cases]
    # The CPU reference among the export's pairs (harness/pairs.py decides which that is).
    reference = next((p for p in runner.model.configs if p.is_cpu_reference), None)
    tf = teacher_forced_runner(runner) if teacher_forced and reference else None
    out: dict[BackendPair, PairRun] = {}
    for pair in pairs:
        compared = tf is not None and reference is not None and pair != reference
        diffs: list[DiffResult | None] = []
        unchecked: dict[str, str] = {}
        if tf is not None and reference is not None and compared:
            # Prompt by prompt, each llm_demo run followed by its comparison: a link lost
            # later leaves every earlier prompt complete (the lab delivers those).
            parts = []
            for case in cases:
                parts.append(runner.run([case.prompt], backend=pair, overlay=overlay, one_per_process=True,
                                        timeout=timeout, extra_env=extra_env))
                if case.prompt.images and not shows_b_images(tf.tool_name):
                    diffs.append(None)
                    unchecked[case.id] = (f"not checkable: {tf.tool_name} shows B no image "
                                          "(needs llm_logits_diff_vl, docs/logits-diff.md#vl-prompts)")
                    continue
                diffs.append(run_teacher_forced(tf, case, pair, reference=reference,
                                                max_new_tokens=max_new_tokens, timeout=timeout,
                                                extra_env=extra_env))
            result = LlmDemoResult([r for p in parts for r in p.runs], [o for p in parts for o in p.prompts])
        else:
            result = runner.run(prompts, backend=pair, overlay=overlay, one_per_process=True, timeout=timeout,
                                extra_env=extra_env)
        run = PairRun(pair, result, teacher_forced=diffs, teacher_forced_unchecked=unchecked)
        run.process_shape_findings = [
            scan_log_for_shape_errors(f"{r.stdout}\n{r.stderr}\n{r.logcat or ''}", source=f"llm_demo {pair}")
            for r in result.runs]
        run.position_findings = position_findings_of(result, cases)
        out[pair] = run
    return out


@dataclass
class Judgement:
    pair: BackendPair
    case: PromptCase
    index: int  # the prompt's position in the run (its llm_demo process)
    text: str | None
    verdict: TextVerdict | None  # None when the run produced no text
    agreement: Agreement | None  # None for the reference pair itself or without a reference
    teacher_forced: DiffResult | None = None  # llm_logits_diff against the CPU reference


def judge_matrix(runs: Mapping[BackendPair, PairRun], cases: Sequence[PromptCase], *, system: str = "") -> list[Judgement]:
    """Coherence of every text (with the export's system prompt, `system`, when it has one:
    an answer reading it back is garbled) and its agreement with the CPU reference."""
    ref_pair = reference_of(runs)
    ref_texts = runs[ref_pair].result.texts if ref_pair and runs[ref_pair].result.ok else None
    judged = []
    for pair, run in runs.items():
        for i, case in enumerate(cases):
            text = run.result.texts[i] if i < len(run.result.texts) else None
            reference = ref_texts[i] if ref_texts and i < len(ref_texts) and pair != ref_pair else None
            verdict = judge(text, prompt=case.prompt.text, reference=reference,
                            expect_any=case.expect_any, system=system or None) if text is not None else None
            agreement = compare(text, reference) if text and reference else None
            tf = run.teacher_forced[i] if i < len(run.teacher_forced) else None
            judged.append(Judgement(pair, case, i, text, verdict, agreement, tf))
    return judged


def finite(x: float | None) -> float | None:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def decide(run: PairRun, j: Judgement, *, checked_elsewhere: Collection[FailureClass] = ()) -> Verdict:
    """THE failure policy of a (pair, prompt); both doors call it through the suites' generation
    check (harness/suite/checks.py), so they give the same verdict by construction.

    Failed on a runner failure, a shape error, a position error, a teacher-forced comparison
    with the CPU reference that compared nothing, garbled
    text, or a wrong fluent answer (a content word of the CPU/CPU answer replaced: "France
    is France" against "France is Paris"), shown as drift with both texts whatever the
    suite's expected words, or a different answer altogether (disagree), or no text at all
    (runtime-error). Other drift (words added, dropped or reordered) passes with a warning,
    and so does this prompt's teacher-forced drift or disagreement: the export's verdict over
    all its prompts (`export_verdict_of`) fails a consistent shift, not one odd prompt.
    The first problem found names the class.

    `checked_elsewhere`: classes a front door reports in tests of their own (suites/qwen3_vl's
    test_mrope_positions). A cell whose verdict is one of them passes here with `deferred` set:
    its later findings are that one's consequences, as in the lab's record of the cell."""
    proc = run.result.runs[j.index] if j.index < len(run.result.runs) else None
    problems: list[tuple[FailureClass, str]] = []
    cls = proc.classification if proc is not None else None
    if cls is not None and not cls.ok:
        problems.append((FailureClass(cls.cls), "; ".join([cls.reason, *cls.errors[:3]]).strip("; ") or cls.cls))
    found = run.process_shape_findings[j.index] if j.index < len(run.process_shape_findings) else []
    shape_errors = errors(found)
    if shape_errors and not problems:
        problems.append((FailureClass.SHAPE_ERROR, shape_errors[0].explain()))
    pos = failing_positions((run.position_findings or {}).get(j.case.id))
    if pos:
        problems.append((FailureClass.MROPE_POSITIONS, pos[0].explain(with_hint=False)))
    tf = j.teacher_forced
    if tf is not None:
        if tf.transport_error and not problems:
            # A link fault, not the model's: the lab reconnects and re-runs this test.
            problems.append((FailureClass.TRANSPORT_ERROR, tf.transport_error))
        elif tf.verdict == "error" and not problems:
            problems.append((FailureClass.LOGITS_DIFF_ERROR, tf.describe()))
    ag = j.agreement
    # A fluent answer that only misses the suite's expected words is judged against the
    # CPU answer instead: drift with both texts, not "garbled".
    expectation_only = (j.verdict is not None and not j.verdict.coherent and ag is not None
                        and j.verdict.only(CoherenceKind.EXPECTATION))
    # A content word of the CPU answer replaced ("France is France" for "Paris") is the more
    # telling finding: it names both texts, whatever the text checker also disliked.
    if ag is not None and ag.wrong_answer and not problems:
        problems.append((FailureClass(ag.level), ag.describe(j.pair.name)))
    if j.verdict is not None and not j.verdict.coherent and not expectation_only and not problems:
        problems.append((FailureClass.GARBLED, "; ".join(j.verdict.reasons)))
    if j.text is None and not problems:
        problems.append((FailureClass.RUNTIME_ERROR, "no text was generated (the run printed no answer)"))
    warning: tuple[RecordWarning, str] | None = None
    if ag is not None:
        if ag.wrong_answer or ag.level == "disagree" or (expectation_only and ag.level != "agree"):
            if not problems:  # class "drift" or "disagree", both texts in the message
                problems.append((FailureClass(ag.level), ag.describe(j.pair.name)))
        elif ag.level != "agree" and not problems:
            warning = (RecordWarning.DRIFT, ag.describe(j.pair.name))
    # One prompt's teacher-forced verdict is evidence, not the export's verdict: the export's
    # record judges all its prompts together (export_verdict_of), so one odd prompt warns.
    if tf is not None and tf.verdict in ("drift", "disagree") and not problems and warning is None:
        warning = (RecordWarning.LOGITS_DRIFT if tf.verdict == "drift" else RecordWarning.LOGITS_DISAGREE,
                   tf.describe())
    if problems and problems[0][0] in checked_elsewhere:
        return Verdict(Status.PASSED, deferred=problems[0][0])
    if problems:
        return Verdict.failed(*problems[0])
    if warning is not None:
        return Verdict.passed(warning[1], warning=warning[0])
    return Verdict.passed()


def record_evidence(rec: TestRecord, run: PairRun, j: Judgement, *, failed: bool, link_fault: bool = False) -> None:
    """Copy a (pair, prompt)'s figures and evidence into `rec`: the runner's signature, perf,
    text, coherence verdict, agreement and teacher-forced extras, and the log excerpt of a
    failed cell. Its verdict is `decide`'s, written by the door (`TestRecord.set_verdict`)."""
    proc = run.result.runs[j.index] if j.index < len(run.result.runs) else None
    cls = proc.classification if proc is not None else None
    rec.signature = cls.signature_ids[0] if cls is not None and not cls.ok and cls.signature_ids else ""
    rec.backend_pair, rec.text = j.pair, j.text or ""
    if proc is not None:
        rec.duration_s = proc.wall_s
        summary = proc.parsed.summary
        if summary is not None:
            rec.prefill_tps = finite(summary.get("prefill_speed_tok_s"))
            rec.decode_tps = finite(summary.get("decode_speed_tok_s"))
    if j.teacher_forced is not None:
        rec.put(j.teacher_forced.evidence())
    elif j.case.id in run.teacher_forced_unchecked:
        rec.keep(Detail.TEACHER_FORCED_NOT_CHECKABLE, run.teacher_forced_unchecked[j.case.id])
    if j.verdict is not None:
        rec.verdict = j.verdict.verdict
    ag = j.agreement
    if ag is not None:
        rec.put(TextAgreement(round(ag.similarity, 3), AgreementWord(ag.level), ag.reference, ag.changes[:5]))
    if failed:
        rec.log_excerpt = _excerpt(proc.stdout + proc.stderr + (proc.logcat or "")) if proc is not None else ""
        if proc is not None:  # what ran on the device, for the cell's repro bundle (harness/replay)
            rec.keep(Detail.DEVICE_COMMAND, {"argv": list(proc.argv), "cwd": proc.run_dir, "env": dict(proc.env or {})})
    if link_fault:  # the lab reconnects on a transport-error verdict (lab/worker.py): the fault itself
        rec.link_fault = (proc.fault if proc is not None else None) or (tf.fault if (tf := j.teacher_forced) else None)


def export_verdict_of(records: Iterable[TestRecord]) -> ExportVerdict | None:
    """The export's verdict on one device from that device's records of the export
    (harness/checks/export_verdict.py): one line per instrument, the teacher-forced lines over
    all prompts of each pair (a consistent shift fails, one odd prompt does not). The suites'
    export_verdict check calls it, so both doors. None when no matrix record was made."""
    records = [r for r in records if r.evidence.get(ExportVerdictEvidence) is None]
    pairs = {r.backend_pair for r in records if r.backend_pair is not None}
    return verdict_of_records(records, reference=reference_of(pairs))


def _excerpt(log: str, lines: int = 12) -> str:
    interesting = [ln for ln in log.splitlines() if re.search(r"error|fail|fault|signal|段错误|Status", ln, re.I)]
    return "\n".join((interesting or log.splitlines())[-lines:])
