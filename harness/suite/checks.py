"""The checks a suite lists, each a call into the module that owns it (checks/shapes,
checks/quant, pipeline.decide, checks/mrope, pipeline.chunked_prefill_check), and the input
each scope gives them. A check fills the record with its evidence and returns a Verdict."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness import pipeline
from harness.checks import DriftWarning, mrope
from harness.checks.quant import check_export_quant
from harness.checks.shapes import ERROR, assert_shapes_ok, check_export_shapes
from harness.errors import ArtifactError
from harness.evidence import Instrument, PlacementUnread, QuantFinding
from harness.export import open_export
from harness.outcomes import FailureClass, Status
from harness.pairs import BackendPair
from harness.provision import ProvisionedModel
from harness.report import Detail, TestRecord
from harness.runners import (
    ROLES,
    ChunkedRun,
    Prompt,
    RoleVerdict,
    chunked_image_cases,
    positions_verdict,
    run_chunkings,
    shapes_verdict,
)
from harness.runners.llm_demo import LlmDemoRunner
from harness.suite.model import CheckCall
from harness.suite.placement import judge_mnn_placement, stamp_mnn_provenance
from harness.verdict import Verdict

# The chunked-prefill prompt: longer than one compiled chunk (128 tokens).
LONG_TEXT = "Summarise this list: " + " ".join(f"Item {i} is a small blue box on the shelf." for i in range(40))


@dataclass
class ExportInput:
    """Per export, no device: the folder and, optionally, the QNN SDK that reads its binaries."""

    path: Path
    qnn_sdk: Path | None = None

    @functools.cached_property
    def model_type(self) -> str:
        return open_export(self.path).model_type


@dataclass
class MatrixInput:
    """The backend matrix of one device session: the runs made, their judgements, and why a
    pair did not run (`harness.suite.run.pair_skip_reason` with the door's selection)."""

    model: ProvisionedModel
    runs: Mapping[BackendPair, pipeline.PairRun]
    judged: Mapping[tuple[BackendPair, str], pipeline.Judgement]
    skip_reason: Callable[[BackendPair], str | None]
    # The export on the host (its QNN stubs are read for placement; None: not judged) and the
    # CPU ops a user expects beyond the suite's (a plan's expected_cpu_ops, --expect-cpu-ops).
    export: Path | None = None
    expected_cpu_ops: Mapping[str, int] | None = None
    qairt: str | None = None  # the QAIRT build of the runtime's QNN libraries, when read

    @property
    def model_type(self) -> str:
        return self.model.model_type

    def not_run(self, pair: BackendPair) -> str | None:
        if pair in self.runs:
            return None
        return self.skip_reason(pair) or f"backend pair {pair} did not run"


@dataclass
class DeviceInput:
    """One device and export: a runner over the provisioned model and runtime."""

    runner: LlmDemoRunner | None  # None only where the suite does not fit (skipped before it runs)
    model: ProvisionedModel
    image: Path | None = None
    timeout: float = 300.0
    extra_env: Mapping[str, str] | None = field(default=None)

    @property
    def model_type(self) -> str:
        return self.model.model_type

    @functools.cached_property
    def chunked_runs(self) -> list[ChunkedRun]:
        """A VL export's CPU pair under the compiled chunk and the other chunkings (run once)."""
        assert self.runner is not None and self.image is not None
        return run_chunkings(self.runner, chunked_image_cases(self.image),
                             BackendPair.cpu_reference(visual=True), timeout=self.timeout,
                             extra_env=self.extra_env)


@dataclass
class SummaryInput:
    """One device's records of this suite and export so far (every attempt's, and the export
    checks' decided before the claim), for the checks that judge the export as a whole."""

    model_type: str
    records: Sequence[TestRecord]


def check_of(rec: TestRecord) -> str:
    """The check a record is a testcase of: "test_generation" for the lab's
    "test_generation[cpu-cat]" and pytest's "suites/x.py::test_generation[cpu-cat]"."""
    return rec.name.rsplit("::", 1)[-1].split("[", 1)[0]


def export_shapes(c: CheckCall[ExportInput]) -> Verdict:
    """The compiled QNN IO fits the model (checks/shapes), read from the NPU stubs (and, with
    the SDK, the context binaries), before any run."""
    inp, rec = c.inp, c.rec
    rec.model = rec.model or inp.path.name
    findings = check_export_shapes(inp.path, soc_id=None, qnn_sdk=inp.qnn_sdk)
    rec.keep(Detail.SHAPE_FINDINGS, sum(f.severity == ERROR for f in findings))
    try:
        assert_shapes_ok(findings)
    except AssertionError as exc:
        return Verdict.failed(FailureClass.SHAPE_ERROR, str(exc))
    return Verdict.passed()


def quant_metadata(c: CheckCall[ExportInput]) -> Verdict:
    """Activation quantization of the LLM graph (checks/quant): every MLP Mul its own range,
    no integer tensor quantized; skipped for an export without activation quantization."""
    inp, rec = c.inp, c.rec
    rec.model = rec.model or inp.path.name
    found = check_export_quant(inp.path)
    if found.skip_reason:
        return Verdict.skipped(found.skip_reason)
    rec.keep(Detail.INSTRUMENT, Instrument.STATIC_QUANT.value)  # the export's verdict reads its line
    if found.report is not None:
        rec.keep(Detail.QUANTIZED_TENSORS, found.report.quantized_tensors)
        rec.keep(Detail.MLP_MUL_INHERITED, found.report.mlp_mul_inherited)
        rec.keep(Detail.INTEGER_TENSORS_QUANTIZED, found.report.integer_tensors_quantized)
        bad = [f for f in found.report.findings if f.is_error]
        if bad:  # the first wrong range, for the cell's "where it departs" (report/departs.py)
            rec.put(QuantFinding(bad[0].kind.value, bad[0].where.tensor or "", bad[0].where.layer, bad[0].message,
                                 len(bad)))
    if found.passed:
        return Verdict.passed(found.message())
    return Verdict.failed(FailureClass.QUANT_METADATA, found.message())


def generation(c: CheckCall[MatrixInput]) -> Verdict:
    """The cell's verdict from pipeline.decide: the runner ran cleanly, no shape error in its
    log, coherent text agreeing with the CPU reference (teacher-forced where the tool runs)."""
    inp, rec, i, deferred = c.inp, c.rec, c.instance, c.deferred
    assert i.pair is not None and i.case_id is not None
    run, j = inp.runs[i.pair], inp.judged[(i.pair, i.case_id)]
    verdict = pipeline.decide(run, j, checked_elsewhere=deferred)
    pipeline.record_evidence(rec, run, j, failed=verdict.is_bad,
                             link_fault=verdict.failure_class is FailureClass.TRANSPORT_ERROR)
    verdict = _placed(inp, i.pair, j, rec, verdict)
    if verdict.warning is not None:
        return replace(verdict, warn_with=DriftWarning(verdict.message, j.agreement))
    return verdict


def _placed(inp: MatrixInput, pair: BackendPair, j: pipeline.Judgement, rec: TestRecord, verdict: Verdict) -> Verdict:
    """A QNN cell's verdict with where its work ran (harness/suite/placement.py): a pass whose
    stubs run ops on the CPU beyond those expected, or hold no QNN graph, becomes `cpu-fallback`."""
    config = inp.model.configs.get(pair)
    if not pair.is_qnn or inp.export is None or config is None:
        return verdict
    runs = inp.runs[pair].result.runs
    proc = runs[j.index] if j.index < len(runs) else None
    output = f"{proc.stdout}\n{proc.logcat or ''}" if proc is not None else ""
    try:
        stamp_mnn_provenance(rec, inp.export, config, inp.qairt)
        unread = converter_missing()
        if unread:  # the mnn extra is optional: the cell keeps its verdict and says what it could not read
            rec.put(PlacementUnread(unread))
            return verdict
        misplaced = judge_mnn_placement(inp.export, pair, config, rec, output, inp.expected_cpu_ops)
    except ArtifactError:
        if verdict.status is Status.PASSED:
            raise  # a cell that ran on stubs the harness cannot read: the check fails, naming the file
        return verdict
    return misplaced if misplaced is not None and verdict.status is Status.PASSED else verdict


def runtime_shape_guards(c: CheckCall[MatrixInput]) -> Verdict:
    """None of the known shape and graph errors in any of the pair's run logs."""
    inp, i = c.inp, c.instance
    assert i.pair is not None
    try:
        assert_shapes_ok(inp.runs[i.pair].shape_findings)
    except AssertionError as exc:
        return Verdict.failed(FailureClass.SHAPE_ERROR, str(exc))
    return Verdict.passed()


def mrope_positions(c: CheckCall[MatrixInput]) -> Verdict:
    """Chunked prefill gives every chunk its slice of the 3-axis positions (pipeline's
    position findings, checks/mrope)."""
    inp, i = c.inp, c.instance
    assert i.pair is not None
    found = inp.runs[i.pair].position_findings or {}
    decided = {c: f for c, f in found.items() if pipeline.failing_positions(f) or not f}
    if found and not decided:  # every dump says it cannot decide: not a verdict
        return Verdict.skipped(f"{i.pair}: the [POSDBG] dumps cannot decide: "
                               + "; ".join(f"{c}: {f[0].message}" for c, f in found.items()))
    for case_id, findings in decided.items():
        try:
            mrope.assert_positions_ok(findings)
        except AssertionError as exc:
            return Verdict.failed(FailureClass.MROPE_POSITIONS, f"{i.pair} {case_id}: {exc}")
    return Verdict.passed()


def _roles(inp: DeviceInput, rec: TestRecord, roles: tuple[str, ...],
           judge: Callable[[list[ChunkedRun], str], RoleVerdict], failure: FailureClass,
           what: str) -> Verdict:
    rec.backend_pair = BackendPair.cpu_reference(visual=True)
    if inp.image is None:
        return Verdict.skipped("no image prompt: the chunked runs are for a visual export")
    verdicts = [judge(inp.chunked_runs, role) for role in roles]
    fails = [line for v in verdicts for line in v.failures]
    if fails:
        return Verdict.failed(failure, f"{what}: " + "\n".join(fails))
    if all(v.skip for v in verdicts):
        return Verdict.skipped("; ".join(v.skip for v in verdicts))
    return Verdict.passed()


def mrope_positions_chunked(c: CheckCall[DeviceInput]) -> Verdict:
    """The CPU pair's positions in one chunk, under the compiled chunk and a padding and a
    non-padding chunking whose boundaries stay out of the image (runners/vl_chunks.py)."""
    inp, rec = c.inp, c.rec
    return _roles(inp, rec, ("one", "compiled", "padding", "no-padding"), positions_verdict,
                  FailureClass.MROPE_POSITIONS, "mRoPE position check failed")


def mrope_positions_image_split(c: CheckCall[DeviceInput]) -> Verdict:
    """The CPU pair's positions with the first chunk ending inside the image (row inflation,
    docs/posdbg.md#row-inflation)."""
    inp, rec = c.inp, c.rec
    return _roles(inp, rec, ("image-split",), positions_verdict, FailureClass.MROPE_POSITIONS,
                  "mRoPE position check failed")


def runtime_shape_guards_chunked(c: CheckCall[DeviceInput]) -> Verdict:
    """No shape or graph error in the CPU pair's chunked runs (e.g. DeepStack rows vs a padded
    chunk), per chunking."""
    inp, rec = c.inp, c.rec
    return _roles(inp, rec, ROLES, shapes_verdict, FailureClass.SHAPE_ERROR, "shape failure")


def chunked_prefill(c: CheckCall[DeviceInput]) -> Verdict:
    """The compiled chunk against one large chunk for prompts longer than a chunk (with an image
    on a visual export), on the CPU reference: teacher-forced with llm_logits_diff when the
    runtime has it, else the greedy texts (pipeline.chunked_prefill_check)."""
    inp, rec = c.inp, c.rec
    assert inp.runner is not None
    pair = BackendPair.cpu_reference(visual=inp.model.visual)
    rec.backend_pair = pair
    prompts = [Prompt(LONG_TEXT, id="long-text")]
    if inp.model.visual and inp.image is not None:
        prompts += [c.prompt for c in chunked_image_cases(inp.image)]
    results = pipeline.chunked_prefill_check(inp.runner, prompts, backend=pair, timeout=inp.timeout,
                                             extra_env=inp.extra_env)
    rec.keep(Detail.CHUNKED_METHOD, results[0].method)
    # An image prompt the tool cannot show B: "not checkable" with the reason, never a verdict.
    rec.keep(Detail.NOT_CHECKABLE, [r.explain() for r in results if not r.checkable])
    results = [r for r in results if r.checkable]
    rec.keep(Detail.CHUNKED_EQUIVALENT, all(r.equal for r in results))
    diffs = [r.diff.evidence() for r in results if r.diff is not None]
    if len(diffs) == 1:
        rec.put(diffs[0])
    bad = [r.explain() for r in results if not r.equal]
    if bad:
        return Verdict.failed(FailureClass.CHUNKED_PREFILL, "\n".join(bad))
    return Verdict.passed()


def converter_missing() -> str | None:
    """Why llm.mnn cannot be read here (harness/mnn_graph.py needs the mnn package's converter)."""
    if importlib.util.find_spec("_tools") is None:
        return "reading llm.mnn needs the converter of the `mnn` package: pip install 'harness[mnn]'"
    return None


def export_verdict(c: CheckCall[SummaryInput]) -> Verdict:
    """The export's verdict on this device over all its prompts, one line per instrument
    (static quant, teacher-forced, text coherence; harness/checks/export_verdict.py): a
    consistent teacher-forced shift fails, one odd prompt does not."""
    inp, rec = c.inp, c.rec
    judged = [r for r in inp.records if check_of(r) in ("test_generation", "test_quant_metadata")]
    made = pipeline.export_verdict_of(judged)
    if made is None:
        return Verdict.skipped("no backend pair ran: nothing to judge the export by")
    rec.put(made.evidence())
    return made.record_verdict()
