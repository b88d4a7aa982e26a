"""The device pipeline both front doors share: run llm_demo over the backend matrix of a
provisioned export, check what came out, and turn it into TestRecords.

    runner = LlmDemoRunner(transport, runtime, model)
    runs = run_matrix(runner, cases, pairs)            # one llm_demo process per prompt
    judged = judge_matrix(runs, cases)                 # coherence + agreement with CPU/CPU
    records = matrix_records(runs, judged, ...)        # what JUnit / SQLite / HTML read

When the pushed runtime holds MNN's `llm_logits_diff`, run_matrix also compares every pair
other than the CPU reference with it, teacher-forced (A = CPU reference, B = the pair), per
prompt; the verdict is a failure on `disagree` (docs/logits-diff.md).

The pytest suites assert on `PairRun`/`Judgement`; the lab scheduler calls `llm_matrix_job`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Sequence

from harness.checks import mrope
from harness.checks.agreement import Agreement, compare
from harness.checks.coherence import Verdict, judge
from harness.checks.shapes import ShapeFinding, scan_log_for_shape_errors
from harness.errors import HarnessError
from harness.pairs import cpu_first, is_cpu_reference, reference_of, uses_qnn
from harness.report.records import TestRecord
from harness.runners.cases import PromptCase, default_cases, write_test_image
from harness.runners.llm_demo import LlmDemoResult, LlmDemoRunner
from harness.runners.logits_diff import DiffResult, LogitsDiffRunner
from harness.runners.overlay import Overlay
from harness.runners.prompts import Prompt

if TYPE_CHECKING:
    from harness.lab.scheduler import DeviceContext


@dataclass
class PairRun:
    """One backend pair's llm_demo runs (a process per prompt) and the log checks."""

    pair: str
    result: LlmDemoResult
    # Shape/graph errors found in each process's log (stdout, stderr, logcat), in prompt order.
    process_shape_findings: list[list[ShapeFinding]] = field(default_factory=list)
    # None: the runtime printed no [POSDBG] lines (not instrumented); else per-prompt findings.
    position_findings: dict[str, list[mrope.PositionFinding]] | None = None
    # Teacher-forced comparison with the CPU reference, per prompt; empty when not run (the
    # reference pair itself, or a runtime without llm_logits_diff).
    teacher_forced: list[DiffResult | None] = field(default_factory=list)

    @property
    def shape_findings(self) -> list[ShapeFinding]:
        return [f for found in self.process_shape_findings for f in found]


def position_findings_of(run: LlmDemoResult, cases: Sequence[PromptCase]) -> dict[str, list[mrope.PositionFinding]] | None:
    found: dict[str, list[mrope.PositionFinding]] = {}
    for proc, case in zip(run.runs, cases):
        text = f"{proc.stdout}\n{proc.logcat or ''}"
        try:
            dumps = mrope.parse_posdbg(text)
        except HarnessError as exc:
            found[case.id] = [mrope.PositionFinding("malformed_dump", str(exc))]
            continue
        if not dumps:
            continue
        sized = [i for i in case.prompt.images if i.height is not None and i.width is not None]
        images = [mrope.image_llm_grid(i.height, i.width) for i in sized]
        prompt_len = proc.parsed.summary.prompt_tokens if proc.parsed.summary is not None else None
        # An image without <hw> has a grid only the device's resize knows: no reference then.
        ref = (mrope.reference_from_first_chunk(dumps, images, prompt_len=prompt_len)
               if len(sized) == len(case.prompt.images) else None)
        if ref is None:
            found[case.id] = [mrope.PositionFinding(
                "no_reference", "the first prefill call cannot anchor a reference (print the full [POSDBG] "
                "form and keep the text before the image inside the first chunk)")]
            continue
        found[case.id] = mrope.check_positions(dumps, ref)
    return found or None


def teacher_forced_runner(runner: LlmDemoRunner) -> LogitsDiffRunner | None:
    """A LogitsDiffRunner on the same device, runtime and model, when the runtime has the tool."""
    return LogitsDiffRunner.if_available(runner.transport, runner.runtime, runner.model)


def run_teacher_forced(tf: LogitsDiffRunner, case: PromptCase, pair: str, *, reference: str,
                       max_new_tokens: int = 64, timeout: float = 300.0,
                       extra_env: Mapping[str, str] | None = None) -> DiffResult:
    """A = the CPU reference, B = `pair`, one llm_logits_diff run, greedy."""
    greedy = Overlay(greedy=True)
    return tf.run(case.prompt, a=reference, b=pair, max_tokens=max_new_tokens, overlay_a=greedy, overlay_b=greedy,
                  timeout=timeout, extra_env=extra_env)


@dataclass
class ChunkedPrefill:
    """Chunked prefill against one chunk for one prompt: teacher-forced when the runtime has
    llm_logits_diff (A = one chunk, B = the compiled chunk), else greedy text compared."""

    label: str
    method: str  # "teacher-forced" | "text"
    equal: bool
    diff: DiffResult | None = None
    text: mrope.EquivalenceResult | None = None

    def explain(self) -> str:
        if self.diff is not None:
            return f"{self.label}: chunked prefill, {self.diff.describe()}"
        return self.text.explain() if self.text is not None else f"{self.label}: not compared"


def chunked_prefill_check(runner: LlmDemoRunner, prompts: Sequence[Prompt], *, backend: str, chunk: int = 128,
                          single: int = 4096, max_new_tokens: int = 32, timeout: float = 300.0,
                          extra_env: Mapping[str, str] | None = None) -> list[ChunkedPrefill]:
    """Does the output depend on the prefill chunk? Teacher-forced where the runtime holds
    llm_logits_diff: every step compares logits for the same history, so a fault shows at the
    step it happens (right after an image for chunk-local mRoPE positions or deepstack rows
    split across chunks), not only when it flips the greedy text. Step 0 is not counted (the
    chunked-forward artefact, docs/logits-diff.md). Without the tool: the greedy texts."""
    one, compiled = Overlay(greedy=True, chunk_limits=(single, 1)), Overlay(greedy=True, chunk_limits=(chunk, 1))
    tf = teacher_forced_runner(runner)
    out: list[ChunkedPrefill] = []
    if tf is not None:
        for p in prompts:
            diff = tf.run(p, a=backend, b=backend, max_tokens=max_new_tokens, overlay_a=one, overlay_b=compiled,
                          timeout=timeout, extra_env=extra_env)
            diff.label_a, diff.label_b = f"{backend} one chunk ({single})", f"{backend} chunk {chunk}"
            out.append(ChunkedPrefill(p.id or p.text[:32], "teacher-forced", diff.verdict == "agree", diff=diff))
        return out
    chunked = runner.run(prompts, backend=backend, overlay=Overlay(max_new_tokens=max_new_tokens, chunk_limits=(chunk, 1)),
                         timeout=timeout, extra_env=extra_env)
    whole = runner.run(prompts, backend=backend, overlay=Overlay(max_new_tokens=max_new_tokens, chunk_limits=(single, 1)),
                       timeout=timeout, extra_env=extra_env)
    for p, a, b in zip(prompts, chunked.texts, whole.texts):
        res = mrope.chunked_equivalence(a or "", b or "", label=p.id or "")
        if not (chunked.ok and whole.ok):
            res = mrope.EquivalenceResult(False, p.id or "", f"runs failed: {chunked.failure_class} / "
                                          f"{whole.failure_class}")
        out.append(ChunkedPrefill(p.id or p.text[:32], "text", res.equal, text=res))
    return out


def run_matrix(runner: LlmDemoRunner, cases: Sequence[PromptCase], pairs: Iterable[str], *,
               max_new_tokens: int = 64, timeout: float = 300.0, overlay: Overlay | None = None,
               extra_env: Mapping[str, str] | None = None, teacher_forced: bool = True) -> dict[str, PairRun]:
    """Run every prompt on every pair, one llm_demo process per prompt (a failure in one
    prompt poisons the rest of its process,
    docs/llm-demo-output.md#one-error-poisons-the-process), and, when the runtime holds
    llm_logits_diff (and `teacher_forced`), the teacher-forced comparison of each pair other
    than the CPU reference against it. Never raises for a failing run."""
    overlay = overlay or Overlay(greedy=True, max_new_tokens=max_new_tokens)
    prompts = [c.prompt for c in cases]
    reference = reference_of(runner.model.configs)
    tf = teacher_forced_runner(runner) if teacher_forced and reference else None
    out: dict[str, PairRun] = {}
    for pair in pairs:
        compared = tf is not None and reference is not None and pair != reference
        diffs: list[DiffResult | None] = []
        if compared:
            # Prompt by prompt, each llm_demo run followed by its comparison: a link lost
            # later leaves every earlier prompt complete (the lab delivers those).
            parts = []
            for case in cases:
                parts.append(runner.run([case.prompt], backend=pair, overlay=overlay, one_per_process=True,
                                        timeout=timeout, extra_env=extra_env))
                diffs.append(run_teacher_forced(tf, case, pair, reference=reference,  # type: ignore[arg-type]
                                                max_new_tokens=max_new_tokens, timeout=timeout,
                                                extra_env=extra_env))
            result = LlmDemoResult([r for p in parts for r in p.runs], [o for p in parts for o in p.prompts])
        else:
            result = runner.run(prompts, backend=pair, overlay=overlay, one_per_process=True, timeout=timeout,
                                extra_env=extra_env)
        run = PairRun(pair, result, teacher_forced=diffs)
        run.process_shape_findings = [
            scan_log_for_shape_errors(f"{r.stdout}\n{r.stderr}\n{r.logcat or ''}", source=f"llm_demo {pair}")
            for r in result.runs]
        run.position_findings = position_findings_of(result, cases)
        out[pair] = run
    return out


@dataclass
class Judgement:
    pair: str
    case: PromptCase
    index: int  # the prompt's position in the run (its llm_demo process)
    text: str | None
    verdict: Verdict | None  # None when the run produced no text
    agreement: Agreement | None  # None for the reference pair itself or without a reference
    teacher_forced: DiffResult | None = None  # llm_logits_diff against the CPU reference


def judge_matrix(runs: dict[str, PairRun], cases: Sequence[PromptCase]) -> list[Judgement]:
    ref_pair = reference_of(runs)
    ref_texts = runs[ref_pair].result.texts if ref_pair and runs[ref_pair].result.ok else None
    judged = []
    for pair, run in runs.items():
        for i, case in enumerate(cases):
            text = run.result.texts[i] if i < len(run.result.texts) else None
            reference = ref_texts[i] if ref_texts and i < len(ref_texts) and pair != ref_pair else None
            verdict = judge(text, prompt=case.prompt.text, reference=reference,
                            expect_any=case.expect_any) if text is not None else None
            agreement = compare(text, reference) if text and reference else None
            tf = run.teacher_forced[i] if i < len(run.teacher_forced) else None
            judged.append(Judgement(pair, case, i, text, verdict, agreement, tf))
    return judged


def finite(x: float | None) -> float | None:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def matrix_records(runs: dict[str, PairRun], judged: Sequence[Judgement], *, suite: str, device: str,
                   soc_model: str = "", htp_arch: str = "", model: str = "") -> list[TestRecord]:
    """One record per (pair, prompt): failed on a runner failure, a shape error, a position
    error, a teacher-forced disagreement with the CPU reference (or a comparison that compared
    nothing), garbled text, or a wrong fluent answer (a content word of the CPU/CPU answer
    replaced: "France is France" against "France is Paris"), shown as drift with both texts
    whatever the suite's expected words, or a different answer altogether (disagree). Other
    drift (words added, dropped or reordered) passes with a warning."""
    records = []
    for j in judged:
        run = runs[j.pair]
        proc = run.result.runs[j.index] if j.index < len(run.result.runs) else None
        rec = TestRecord(name=f"{suite}::{j.pair}::{j.case.id}", suite=suite, device=device, soc_model=soc_model,
                         htp_arch=htp_arch, model=model, backend_pair=j.pair, text=j.text or "")
        if proc is not None:
            rec.duration_s = proc.wall_s
            summary = proc.parsed.summary
            if summary is not None:
                rec.prefill_tps = finite(summary.get("prefill_speed_tok_s"))
                rec.decode_tps = finite(summary.get("decode_speed_tok_s"))
        problems: list[tuple[str, str]] = []
        cls = proc.classification if proc is not None else None
        if cls is not None and not cls.ok:
            rec.signature = cls.signature_ids[0] if cls.signature_ids else ""
            problems.append((cls.cls, "; ".join([cls.reason, *cls.errors[:3]]).strip("; ") or cls.cls))
        found = run.process_shape_findings[j.index] if j.index < len(run.process_shape_findings) else []
        shape_errors = [f for f in found if f.severity == "error"]
        if shape_errors and not problems:
            problems.append(("shape-error", shape_errors[0].explain()))
        pos = (run.position_findings or {}).get(j.case.id)
        if pos:
            problems.append(("mrope-positions", pos[0].explain(with_hint=False)))
        tf = j.teacher_forced
        if tf is not None:
            rec.extras["teacher_forced"] = tf.record_extras()
            if tf.transport_error and not problems:
                # A link fault, not the model's: the lab reconnects and re-runs this test.
                problems.append(("transport-error", tf.transport_error))
            elif tf.verdict == "disagree":
                problems.append(("logits-disagree", tf.describe()))
            elif tf.verdict == "error" and not problems:
                problems.append(("logits-diff-error", tf.describe()))
        ag = j.agreement
        # A fluent answer that only misses the suite's expected words is judged against the
        # CPU answer instead: drift with both texts, not "garbled".
        expectation_only = (j.verdict is not None and not j.verdict.coherent and ag is not None
                            and all(r.startswith("expectation:") for r in j.verdict.reasons))
        # A content word of the CPU answer replaced ("France is France" for "Paris") is the more
        # telling finding: it names both texts, whatever the text checker also disliked.
        if ag is not None and ag.wrong_answer and not problems:
            problems.append((ag.level, ag.describe(j.pair)))
        if j.verdict is not None and not j.verdict.coherent and not expectation_only and not problems:
            problems.append(("garbled", "; ".join(j.verdict.reasons)))
        if j.verdict is not None:
            rec.verdict = j.verdict.verdict
        if ag is not None:
            rec.extras["agreement"] = {"similarity": round(ag.similarity, 3), "level": ag.level,
                                       "reference": ag.reference, "changes": [list(c) for c in ag.changes[:5]]}
            if ag.wrong_answer or ag.level == "disagree" or (expectation_only and ag.level != "agree"):
                if not problems:  # class "drift" or "disagree", both texts in the message
                    problems.append((ag.level, ag.describe(j.pair)))
            elif ag.level != "agree" and not problems:
                rec.message = ag.describe(j.pair)
                rec.extras["warning"] = "drift"
        if tf is not None and tf.verdict == "drift" and not problems and "warning" not in rec.extras:
            rec.message = tf.describe()
            rec.extras["warning"] = "logits-drift"
        if problems:
            rec.status = "failed"
            rec.failure_class, rec.message = problems[0]
            rec.log_excerpt = _excerpt(proc.stdout + proc.stderr + (proc.logcat or "")) if proc is not None else ""
        records.append(rec)
    return records


def _excerpt(log: str, lines: int = 12) -> str:
    interesting = [ln for ln in log.splitlines() if re.search(r"error|fail|fault|signal|段错误|Status", ln, re.I)]
    return "\n".join((interesting or log.splitlines())[-lines:])


# ---- the lab's job ---------------------------------------------------------------------------

def _device_path(template: str, ctx: "DeviceContext") -> Path:
    return Path(template.format(htp_arch=ctx.device.htp_arch, soc=ctx.device.soc_model, device=ctx.device.name))


def llm_matrix_job(ctx: "DeviceContext") -> Iterator[TestRecord]:
    """Provision the entry's model and runtime, run the backend matrix, check, emit records.

    Plan options used: `runtime_dir` (may contain {htp_arch}, {soc}, {device}), `qnn_sdk`,
    `max_new_tokens`, `timeout_s`, `env` (extra environment for the runner); the suite's
    `backends` select pairs."""
    from harness.provision import provision_model, provision_runtime

    options = {**ctx.plan.options, **ctx.entry.model.options, **ctx.entry.suite.options}
    if "runtime_dir" not in options:
        raise HarnessError(f"plan {ctx.plan.name!r}: options.runtime_dir is missing; point it at the folder "
                           "with llm_demo and its libraries (it may use {htp_arch})")
    model = provision_model(ctx.transport, ctx.entry.model.path)
    visual = any("/" in p for p in model.configs) and "qnn/qnn" in model.configs
    image = write_test_image(ctx.out_dir / "inputs" / "red-square.png") if visual else None
    cases = default_cases(visual, image)
    pairs = [p for p in (ctx.entry.suite.backends or tuple(model.configs)) if p in model.configs]
    if not pairs:
        raise HarnessError(f"{ctx.plan.path}: suite {ctx.entry.suite.name!r} asks for backends "
                           f"{', '.join(ctx.entry.suite.backends)} but {ctx.entry.model.name} has configs for "
                           f"{', '.join(model.configs) or 'none'}; fix `backends:` (visual/llm pairs for VL models)")
    label = f"{ctx.entry.model.name} ({model.model_type})"
    if not ctx.device.has_htp:
        # The host runs the CPU pairs; its QNN cells are skipped with the reason.
        for pair in [p for p in pairs if uses_qnn(p)]:
            for c in cases:
                name = f"{ctx.entry.suite.name}::{pair}::{c.id}"
                if not ctx.already_done(name):
                    yield TestRecord(name=name, suite=ctx.entry.suite.name, device=ctx.device.name, status="skipped",
                                     soc_model=ctx.device.soc_model, model=label, backend_pair=pair,
                                     message=f"{ctx.device.name} is the host (soc: host): no QNN/HTP backend")
        pairs = [p for p in pairs if not uses_qnn(p)]
        if not pairs:
            return
    # The CPU pairs need no QNN library: they are required only when a QNN pair runs.
    runtime = provision_runtime(ctx.transport, _device_path(str(options["runtime_dir"]), ctx),
                                qnn_sdk=_device_path(str(options["qnn_sdk"]), ctx) if options.get("qnn_sdk") else None,
                                need_qnn=any(uses_qnn(p) for p in pairs),
                                qnn_sdk_option=f"options.qnn_sdk in {ctx.plan.path}")
    # CPU/CPU first: the reference every other pair is compared with.
    pairs = cpu_first(pairs)
    runner = LlmDemoRunner(ctx.transport, runtime, model)
    env = {str(k): str(v) for k, v in dict(options.get("env") or {}).items()}
    kwargs = dict(max_new_tokens=int(options.get("max_new_tokens", 64)),
                  timeout=float(options.get("timeout_s", ctx.entry.suite.timeout_s)), extra_env=env or None)
    # Pair by pair, so results arrive as they are made and a retry after a dropped link
    # re-runs only what was not delivered; the CPU reference is re-run when a later pair needs it.
    def done(pair: str) -> bool:
        return all(ctx.already_done(f"{ctx.entry.suite.name}::{pair}::{c.id}") for c in cases)

    reference: dict[str, PairRun] = {}
    for i, pair in enumerate(pairs):
        is_reference = is_cpu_reference(pair)
        needed_as_reference = is_reference and not all(done(p) for p in pairs[i + 1:])
        if done(pair) and not needed_as_reference:
            continue
        if ctx.stopping:
            return
        runs = {**reference, **run_matrix(runner, cases, [pair], **kwargs)}
        judged = [j for j in judge_matrix(runs, cases) if j.pair == pair]
        for rec in matrix_records(runs, judged, suite=ctx.entry.suite.name, device=ctx.device.name,
                                  soc_model=ctx.device.soc_model, htp_arch=ctx.device.htp_arch, model=label):
            if not ctx.already_done(rec.name):
                yield rec
        if is_reference:
            reference = {pair: runs[pair]}
    runner.cleanup()
