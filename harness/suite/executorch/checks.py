"""The ExecuTorch suite's checks (harness/suite/registry.py EXECUTORCH_QNN) and their input,
the same for both doors (suites/executorch_qnn, harness/lab/et_job.py): each format's program
through ExecuTorch's real runner, judged on the runner's output, its own numbers and its
agreement with the CPU reference of the same model (checks/et_reference.py); the CPU exports;
the real load failure; an ETDump profile (docs/executorch-runner.md)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.checks import (
    GreedyReference,
    QuantBudget,
    compare_outputs,
    generated_after,
    match_tokens,
    quant_budget,
    vocab_pieces,
)
from harness.errors import excerpt
from harness.evidence import Timing, with_expected
from harness.hostfiles import child_pythonpath
from harness.inventory import DeviceSpec
from harness.outcomes import FailureClass, Status
from harness.pairs import Backend, BackendPair
from harness.provision import PreflightError, preflight_program, provision_model, runner_qairt
from harness.qnn import PteError, classify_qnn_log
from harness.report import Detail, TestRecord
from harness.runners import QUANT_FORMATS, skip_reason
from harness.runners.executorch import (
    ArtifactKind,
    EtArtifact,
    EtCatalogue,
    EtRunResult,
    ExecutorchRunner,
    LlamaRunConfig,
    observer_metrics,
    read_catalogue,
)
from harness.suite.executorch.float_reference import judge_against_float
from harness.suite.executorch.placement import EXPECTED_CPU_OPS, judge_placement, stamp_provenance
from harness.suite.model import CheckCall
from harness.transport import Transport
from harness.verdict import Verdict

PROMPT = "What is the capital of France? Answer briefly."
HOST_SEQ_LEN = 48  # the tiny CPU llama's context is 128
FORWARD_ITERATIONS = 3


@dataclass
class EtInput:
    """One device and `--model-dir`: its formats (the catalogue) and the ExecuTorch runner,
    provisioned on first use (`make_runner`: the emulator's, the host's or the device's)."""

    device: DeviceSpec
    transport: Transport
    model_dir: Path
    make_runner: Callable[[], ExecutorchRunner]
    work: Path  # host folder for pulled outputs and ETDumps
    host_lane: bool  # no HTP, no runtime folder: ExecuTorch's real LLM runner on the host CPU
    timeout: float = 600.0
    model_type: str = "executorch"  # every ExecuTorch export fits the suite
    # The device's records so far (the localize check reads its format's cell), and whether
    # localization was asked for (--localize, a plan's `localize: true`) beyond failed cells.
    siblings: Callable[[], Sequence[TestRecord]] = lambda: ()
    localize: bool = False
    expected_cpu_ops: Mapping[str, int] | None = None  # beyond the suite's (a plan's key, --expect-cpu-ops)
    # Per format, the quantization's quality budget beyond the defaults (a plan's `quant_budget`,
    # --quant-budget), and whether a run may end with nothing judged (`allow_unjudged`, --allow-unjudged).
    quant_budgets: Mapping[str, QuantBudget] | None = None
    allow_unjudged: bool = False
    export_format: str | None = None  # a lone export's format when its records name none (--export-format)
    # A folder holding reference/ for every program of model_dir: a declared reference the harness
    # built (pytest's --reference-checkpoint ...); None: each program's own, beside it.
    reference_dir: Path | None = None
    seq_len: int = 128  # a QNN program's run through the LLM runner: prompt and generated tokens (a plan's option)

    @functools.cached_property
    def catalogue(self) -> EtCatalogue:
        """Read on first use: a folder that cannot be read fails each check, named (run_check)."""
        return read_catalogue(self.model_dir, self.device.soc_model if self.device.has_htp else None).declaring(
            self.export_format)

    @functools.cached_property
    def runner(self) -> ExecutorchRunner:
        return self.make_runner()

    def cleanup(self) -> None:
        """The runner's run folders go, when a check provisioned it."""
        if "runner" in self.__dict__:  # cached_property: set once the runner was made
            self.runner.cleanup()

    def runtime_qairt(self) -> str | None:
        """The QAIRT build of the runtime the cells ran with (None before a check made the runner)."""
        return self.runner.runtime.qairt_build if "runner" in self.__dict__ else None

    def stamp(self, rec: TestRecord, art: EtArtifact | None = None) -> None:
        rec.put(Timing(self.device.timing))  # emulator times are not device speed
        if art is not None and art.pte is not None:
            rec.model = rec.model or art.pte.name


def qnn_failure(label: str, stdout: str, stderr: str, exit_code: int | None, rec: TestRecord) -> Verdict | None:
    """A failed QNN run named by QNN's own log (harness/qnn/log.py: op validation, ABI,
    corrupt PTE, missing libraries, a signal, ...); None when the log names no QNN failure."""
    found = classify_qnn_log(f"{stdout}\n{stderr}", exit_code)
    if found.failure is None or found.failure_class is None:
        return None
    rec.keep(Detail.QNN_LOG, found.to_json())
    return Verdict.failed(found.failure_class, f"{label}: QNN {found.failure.value}: {found.message}")


def _last_words(result: EtRunResult, n: int = 3) -> list[str]:
    """The runner's own last lines (stderr, else stdout) when no signature names its failure:
    `[llm_runner_helper.cpp:113] Required metadata method get_max_seq_len not found in model`."""
    lines = [x.strip() for x in (result.stderr.strip() or result.stdout.strip()).splitlines() if x.strip()]
    return [f"the runner said: {x}" for x in lines[-n:]]


def _llm_verdict(result: EtRunResult, label: str, rec: TestRecord, *, qnn: bool = False) -> Verdict | None:
    """The run as the real runner reports it: class, its own numbers adding up, some text.
    None: it passed these; the caller judges agreement. `qnn`: a failure is first read as QNN's."""
    rec.duration_s = round(result.wall_s, 3)
    metrics = observer_metrics(result.stats or {})
    rec.prefill_tps, rec.decode_tps = metrics.get("prefill_tok_s"), metrics.get("decode_tok_s")
    rec.keep(Detail.PRODUCED_TOKENS, metrics.get("produced_tokens"))
    if not result.ok:
        named = qnn_failure(label, result.stdout, result.stderr, result.exit_code, rec) if qnn else None
        if named is not None:
            return named
        cls = result.classification
        rec.log_excerpt = excerpt(f"{result.stdout}\n{result.stderr}".strip())
        said = cls.errors[:3] if cls.primary is not None else [*_last_words(result), *cls.errors[:1]]
        return Verdict.failed(FailureClass(cls.cls), f"{label}: the runner failed ({cls.cls}): "
                              + "; ".join([cls.reason, *said]).strip("; "))
    if result.problems:
        return Verdict.failed(FailureClass.CHECK_FAILED, f"{label}: the runner's numbers do not add up: "
                              + "; ".join(result.problems))
    rec.text = result.text
    if not result.text.strip():
        return Verdict.failed(FailureClass.RUNTIME_ERROR, f"{label}: no text (outputs.txt or stdout)")
    return None


def _run_export(inp: EtInput, art: EtArtifact, rec: TestRecord, *, seq_len: int = 128,
                extra_env: dict[str, str] | None = None) -> EtRunResult:
    # The load preflight judges the program against the QAIRT of the runner that will run it.
    runtime = inp.runner.runtime if art.uses_qnn else None
    model = provision_model(inp.transport, art.folder, name=f"et-{art.name}",
                            runtime_qairt_build=runtime.qairt_build if runtime is not None else None)
    tok = art.tokenizer.name if art.tokenizer else "tokenizer.bin"
    cfg = LlamaRunConfig(model_path=next(iter(model.configs.values())), tokenizer_path=tok, prompts=(PROMPT,),
                         seq_len=seq_len)
    rec.model = rec.model or model.model_type
    return inp.runner.llama(model.remote_dir).run(cfg, local_dir=inp.work / art.name, extra_env=extra_env,
                                                  timeout=inp.timeout)


def _run_llm(inp: EtInput, art: EtArtifact, rec: TestRecord) -> Verdict:
    """A runner-ready KV program: TextLLMRunner greedy on the reference's prompt; its tokens
    against the eager greedy tokens (fakequant, else the first list)."""
    assert art.pte is not None and art.tokenizer is not None and art.greedy_ref is not None
    ref = GreedyReference.read(art.greedy_ref)
    cfg = LlamaRunConfig(model_path=str(art.pte), tokenizer_path=str(art.tokenizer), prompts=(ref.prompt,),
                         seq_len=ref.seq_len)
    result = inp.runner.llama(inp.runner.workspace).run(cfg, local_dir=inp.work / art.name, timeout=inp.timeout)
    failed = _llm_verdict(result, art.name, rec, qnn=True)
    if failed is not None:
        return failed
    which = "fakequant" if "fakequant" in ref.tokens else next(iter(ref.tokens))
    generated = generated_after(result.text, ref.prompt)
    if generated is None:
        return Verdict.failed(FailureClass.CHECK_FAILED, f"{art.name}: the runner did not echo the prompt "
                              f"{ref.prompt!r}: {result.text[:80]!r}")
    match = match_tokens(generated, ref.tokens[which], vocab_pieces(art.tokenizer), reference=which)
    rec.keep(Detail.TOKEN_AGREEMENT, match.to_json())
    if not match.passed:
        return Verdict.failed(FailureClass.DISAGREE, f"{art.name}: {match.describe()}")
    return Verdict.passed(f"{art.name}: {match.describe()}")


def _run_forward(inp: EtInput, art: EtArtifact, rec: TestRecord) -> Verdict:
    """A forward program on its sample input; its output against the fake-quant reference."""
    assert art.pte is not None and art.reference is not None
    run = inp.runner.forward(str(art.pte), [str(x) for x in art.inputs], local_dir=inp.work / art.name,
                             iterations=FORWARD_ITERATIONS, timeout=inp.timeout)
    rec.duration_s = round(run.wall_s, 3)
    if not run.ok or run.output is None:
        named = qnn_failure(art.name, run.stdout, run.stderr, run.exit_code, rec)
        if named is not None:
            return named
        cls = FailureClass(run.classification.cls) if not run.classification.ok else FailureClass.RUNTIME_ERROR
        return Verdict.failed(cls, f"{art.name}: {run.failure()}")
    rec.keep(Detail.FORWARD_S, run.run_s)
    rec.keep(Detail.BACKENDS, (run.result or {}).get("backends"))
    match = compare_outputs(np.load(run.output), np.load(art.reference))
    rec.keep(Detail.REFERENCE_AGREEMENT, match.to_json())
    if not match.passed:
        return Verdict.failed(FailureClass.DISAGREE, f"{art.name} against its fake-quant reference: {match.describe()}")
    return Verdict.passed(f"{art.name} against its fake-quant reference: {match.describe()}")


def quant_format_runs(c: CheckCall[EtInput]) -> Verdict:
    """Each quant format the device's HTP arch supports runs through ExecuTorch's real runner
    with the QNN backend, judged against the CPU reference of the same model."""
    inp, rec, i = c.inp, c.rec, c.instance
    quant, device = i.quant or "", inp.device
    rec.backend_pair = BackendPair(Backend.QNN, variant=quant)
    if not device.has_htp:
        return Verdict.skipped(f"{quant} is a QNN format: {device.name} has no HTP (the host); the CPU exports "
                               "run in test_cpu_export_runs")
    reason = skip_reason(quant, device.htp_arch) if quant in QUANT_FORMATS else None  # not UNRECORDED_QNN
    if reason:
        return Verdict.skipped(f"{quant} on {device.name} ({device.htp_arch}): {reason}")
    broken = inp.catalogue.broken([quant])
    if broken:  # a broken program is a failure, never "no program of that format"
        return Verdict.failed(FailureClass.EXPORT_INVALID, f"{quant}: {broken[quant]}")
    art = inp.catalogue.qnn(quant)
    if art is None:
        return Verdict.skipped(inp.catalogue.missing_reason(quant))
    if art.kind is not ArtifactKind.EXPORT and not device.emulated:
        return Verdict.skipped(f"{art.pte}: host QNN material runs on an emulated HTP (`htp: emulator`), "
                               f"not on {device.name}")
    inp.stamp(rec, art)
    try:
        if art.kind is ArtifactKind.EXPORT:
            verdict = _llm_verdict(_run_export(inp, art, rec, seq_len=inp.seq_len), quant, rec, qnn=True) or Verdict.passed()
            verdict = _placed(inp, art, rec, verdict)
            if verdict.status is not Status.PASSED:
                return verdict
            return judge_against_float(inp.transport, inp.runner, art, rec, label=quant, local=inp.work / art.name,
                                       timeout=inp.timeout, budget=quant_budget(quant, inp.quant_budgets),
                                       emulated=device.emulated, device=device.name, reference_dir=inp.reference_dir)
        assert art.pte is not None
        preflight_program(art.pte, device, runner_qairt(device, inp.runner.runtime.qairt_build))
    except PreflightError as exc:  # refused before it ran: the axis and both sides are in the message
        rec.keep(Detail.LOAD_PREFLIGHT, str(exc.axis))
        return Verdict.failed(FailureClass.BINARY_MISMATCH, f"{art.name}: refused before it ran: {exc}")
    verdict = _run_llm(inp, art, rec) if art.kind is ArtifactKind.LLM else _run_forward(inp, art, rec)
    return _placed(inp, art, rec, verdict)


def _placed(inp: EtInput, art: EtArtifact, rec: TestRecord, verdict: Verdict) -> Verdict:
    """A run's verdict with where its work ran: a pass whose program runs ops on the CPU beyond
    those expected becomes `cpu-fallback`; provenance on every cell that ran."""
    if art.pte is None:
        return verdict
    try:
        stamp_provenance(rec, inp.device, art.pte, inp.runtime_qairt())
        misplaced = judge_placement(art.pte, with_expected(EXPECTED_CPU_OPS[art.kind], inp.expected_cpu_ops), rec)
    except PteError:
        if verdict.status is Status.PASSED:
            raise  # a program that ran but cannot be read: the check fails, naming the file
        return verdict  # a corrupt program's run failed already, with QNN's own words for it
    if misplaced is not None and verdict.status is Status.PASSED:
        return misplaced
    return verdict


def cpu_export_runs(c: CheckCall[EtInput]) -> Verdict:
    """Exports for the CPU (XNNPACK, portable) run with the runner's own numbers adding up, the
    prompt echoed first and no more tokens than the runner's resolved limit."""
    inp, rec = c.inp, c.rec
    cpu = inp.catalogue.cpu_exports()
    broken = {n: why for n, why in inp.catalogue.broken().items() if n not in QUANT_FORMATS}
    if broken:  # a program that does not load is no CPU export: it fails, never silently skipped
        return Verdict.failed(FailureClass.EXPORT_INVALID, "; ".join(f"{n}: {why}" for n, why in broken.items()))
    if not cpu:
        return Verdict.skipped("no CPU export (a .pte without QnnBackend) in --model-dir")
    inp.stamp(rec)
    for name, art in cpu.items():
        rec.backend_pair = BackendPair(Backend.CPU, variant=name)
        result = _run_export(inp, art, rec, seq_len=HOST_SEQ_LEN)
        failed = _llm_verdict(result, name, rec)
        if failed is not None:
            return failed
        if not result.text.startswith(PROMPT):
            return Verdict.failed(FailureClass.CHECK_FAILED, f"{name}: the runner echoes the prompt first: "
                                  f"{result.text[:80]!r}")
        limit = result.output.limits[-1]["max_new_tokens"] if result.output and result.output.limits else None
        produced = observer_metrics(result.stats or {})["produced_tokens"]
        if limit is not None and produced is not None and produced > limit:
            return Verdict.failed(FailureClass.CHECK_FAILED, f"{name}: {produced} tokens produced over the limit {limit}")
    return Verdict.passed()


def load_failure_is_classified(c: CheckCall[EtInput]) -> Verdict:
    """The real runner without the LLM custom-op kernels registered: the load fails, and the run
    is classified by its real signature (the missing operator, then the method load)."""
    inp, rec = c.inp, c.rec
    if not inp.host_lane:
        return Verdict.skipped("only the host runner can leave ExecuTorch's custom ops out (HARNESS_ET_CUSTOM_OPS=0)")
    cpu = inp.catalogue.cpu_exports()
    if not cpu:
        return Verdict.skipped("no CPU export in --model-dir")
    from harness.hostrt.executorch import CUSTOM_OPS_ENV

    inp.stamp(rec)
    result = _run_export(inp, next(iter(cpu.values())), rec, seq_len=HOST_SEQ_LEN, extra_env={CUSTOM_OPS_ENV: "0"})
    cls = result.classification
    wanted = [(result.exit_code == 1 and cls.cls == FailureClass.INIT_ERROR, f"exit {result.exit_code}, class {cls.cls}"),
              (cls.primary is not None and cls.primary.signature.id == "et-missing-operator",
               f"first signature {cls.primary.signature.id if cls.primary else None}"),
              ("et-method-load-failed" in cls.signature_ids, f"signatures {cls.signature_ids}"),
              (any("llama::custom_sdpa.out" in e for e in cls.errors), "no llama::custom_sdpa.out in the errors")]
    bad = [why for ok, why in wanted if not ok]
    if bad:
        return Verdict.failed(FailureClass.CHECK_FAILED, "the load failure was not classified by its signature: "
                              + "; ".join(bad))
    return Verdict.passed(f"{cls.cls}: {cls.reason}")


def host_python_env() -> dict[str, str]:
    """PYTHONPATH for a host child running this checkout's modules."""
    return {"PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH"))}


__all__ = ["EtInput", "cpu_export_runs", "load_failure_is_classified", "quant_format_runs"]
