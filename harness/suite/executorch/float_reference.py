"""A QNN cell of a user's ExecuTorch export judged against the export's own float model
(checks/float_reference.py, docs/executorch-reference.md#the-verdict): the program run
teacher-forced over the reference's tokens through the suite's forward runner (`pte_runner`: on an
emulated HTP the QNN parts run on QAIRT's emulator), its logits at every step against the float
model's; and, when the export has its debug build, localized per op (docs/localize.md). Per-op
evidence decides a fault: an op under its line is `disagree`, named. End-to-end distance with
every op clean is the quantization's cost: within the format's budget a pass, over it
`quant-budget`. No reference: a skip naming what to add, of class `unjudged` (judged.py reads it)."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import numpy as np

from harness.checks import QuantBudget, judge_float_reference, missing_float_reference, read_float_reference
from harness.checks.localize import debug_files_for, localize
from harness.errors import ArtifactError, HarnessError, ProvisionError, TransportError
from harness.evidence import Agreement, FloatReferenceAgreement, Localization, LocalizeEvidence, Outcome
from harness.hostfiles import child_pythonpath
from harness.outcomes import FailureClass
from harness.provision import provision_model
from harness.qnn import QnnUnavailable, find_host_qnn
from harness.report import Detail, TestRecord
from harness.runners.executorch import UNRECORDED_QNN, EtArtifact, ExecutorchRunner, run_debug_program, run_on_device
from harness.transport import Transport
from harness.verdict import Verdict


def localize_program(folder: Path, quant: str, *, emulated: bool, device: str, work: Path, timeout: float,
                     on_device: tuple[Transport, ExecutorchRunner] | None = None,
                     rec: TestRecord | None = None) -> Localization | str:
    """The program of `folder` compared per op from its debug build, run where the cell ran: the
    emulated HTP's pybindings, or the device's `qnn_executor_runner` beside the provisioned
    `qnn_llama_runner` (`on_device`); or why it cannot be (no debug build, no host QNN, no device
    runner given). ArtifactError (DebugRunFailed: a named one) or ProvisionError: the debug run failed."""
    export = debug_files_for(folder)
    if export.missing_build():
        try:
            export.require_build()
        except ArtifactError as exc:
            return str(exc)
    if emulated:
        try:
            env = find_host_qnn().child_env({**os.environ, "PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH"))})
        except QnnUnavailable as exc:
            return str(exc)
        return localize(run_debug_program(export, work, env, timeout_s=timeout), quant)
    if on_device is None:
        return f"no runner on {device} was given for its debug run (docs/localize.md#on-a-device)"
    transport, runner = on_device
    done = run_on_device(export, work, transport, runner.runtime, runner.workspace, timeout_s=timeout,
                         signatures=runner.signatures)
    if rec is not None:
        rec.keep(Detail.LOCALIZE_PUSH, {"files_sent": done.push.files_sent, "bytes_sent": done.push.bytes_sent,
                                        "debug_buffer_size": done.buffer_bytes})
    return localize(done.files, quant)


def decide(label: str, agreement: FloatReferenceAgreement, per_op: Localization | str) -> Verdict:
    """The cell's verdict from both: a fault is an op under its line; the rest is the budget's."""
    said = f"{label} against its float model ({agreement.reference}): {agreement.summary()}"
    if isinstance(per_op, Localization) and per_op.outcome is Outcome.DEPARTED and per_op.first is not None:
        f = per_op.first
        return Verdict.failed(FailureClass.DISAGREE, f"{label}: a fault at {f.node} ({f.target}, {f.layer or 'no layer'}): "
                              f"{f.sqnr_db:.1f} dB SQNR, under {per_op.threshold_db:g} dB; {per_op.summary()}; {said}")
    if agreement.verdict is Agreement.ERROR:
        return Verdict.failed(FailureClass.CHECK_FAILED, f"{said} ({'; '.join(agreement.reasons)})")
    if agreement.verdict is Agreement.DISAGREE:
        return Verdict.failed(FailureClass.DISAGREE, f"{said} ({'; '.join(agreement.reasons)})")
    if isinstance(per_op, Localization) and per_op.outcome is Outcome.NONE:
        ops = f"every op clean per op: {per_op.summary()}"
    else:
        why = per_op.summary() if isinstance(per_op, Localization) else per_op
        ops = f"not localized ({why}): a fault is not told apart from the quantization's cost"
    if agreement.verdict is Agreement.AGREE:
        return Verdict.passed(f"{said}; within its budget; {ops}")
    return Verdict.failed(FailureClass.QUANT_BUDGET, f"{said}: over its quality budget ({'; '.join(agreement.reasons)}); "
                          f"{ops}; the quantization's cost on this model: a budget of its own (a plan's "
                          "`quant_budget`, --quant-budget) or a finer format (docs/executorch-reference.md#the-verdict)")


def judge_against_float(transport: Transport, runner: ExecutorchRunner, art: EtArtifact, rec: TestRecord, *,
                        label: str, local: Path, timeout: float, budget: QuantBudget | None, emulated: bool,
                        device: str, reference_dir: Path | None = None) -> Verdict:
    """`art` (an export folder the LLM runner has run) against its reference/ (or `reference_dir`'s,
    a declared one) and, with its debug build, per op; `local` is the host folder for the tokens,
    the pulled logits and the debug run."""
    try:
        reference = read_float_reference(reference_dir or art.folder)
    except ArtifactError as exc:
        return Verdict.failed(FailureClass.CHECK_FAILED, f"{label}: {exc}")
    if reference is None:
        return Verdict.skipped(f"{label} ran, but {missing_float_reference(art.folder)}; or declare what it was exported "
                               "from and the harness builds it: --reference-checkpoint, --reference-params, "
                               "--reference-tokenizer (a plan build's `reference:`, docs/etllama.md)", FailureClass.UNJUDGED)
    if art.pte is None:
        return Verdict.skipped(f"{label}: {art.folder} holds no .pte to judge against {reference.index}")
    if not runner.has_forward:
        return Verdict.skipped(f"{label}: judging against {reference.index} runs the program teacher-forced with "
                               "ExecuTorch's pybindings runner (pte_runner), which only the host runtimes have "
                               "(an emulated HTP or the host); this device's runtime has none")
    model = provision_model(transport, art.folder, name=f"et-{art.name}")
    local.mkdir(parents=True, exist_ok=True)
    tokens_local = local / "reference-tokens.npy"
    np.save(tokens_local, reference.token_matrix())
    work_dir = posixpath.join(runner.workspace, "reference")
    tokens_remote = posixpath.join(work_dir, f"{art.name}-tokens.npy")
    try:
        transport.makedirs(work_dir)
        transport.push(tokens_local, tokens_remote)
    except (TransportError, HarnessError) as exc:
        return Verdict.failed(FailureClass.TRANSPORT_ERROR, f"{label}: pushing the reference's tokens: {exc}")
    run = runner.forward(posixpath.join(model.remote_dir, art.pte.name), [], local_dir=local, timeout=timeout,
                         tokens=tokens_remote)
    if not run.ok or run.output is None:
        cls = FailureClass(run.classification.cls) if not run.classification.ok else FailureClass.RUNTIME_ERROR
        return Verdict.failed(cls, f"{label}: the teacher-forced run over {reference.index}'s tokens failed: "
                              f"{run.failure()}")
    rec.keep(Detail.REFERENCE_RUN_S, run.run_s)
    agreement = judge_float_reference(reference, np.load(run.output), label=label, budget=budget)
    rec.put(agreement)
    try:  # a debug build's run failing is the localize check's failure, said there; here: not localized
        per_op = localize_program(art.folder, label, emulated=emulated, device=device, work=local / "localize",
                                  timeout=timeout, on_device=(transport, runner), rec=rec)
    except (ArtifactError, ProvisionError) as exc:
        per_op = f"its debug run failed: {exc}"
    if isinstance(per_op, Localization):
        rec.put(LocalizeEvidence(per_op, cell=rec.name.rsplit("::", 1)[-1]))
    verdict = decide(label, agreement, per_op)
    if label == UNRECORDED_QNN and verdict.failure_class is not FailureClass.DISAGREE:
        return Verdict.skipped(f"{label}: its records name no quant format, so its budget is not known "
                               f"({agreement.summary()}); declare it: --export-format FORMAT or the export's "
                               "export_args.json `quant_format` (docs/executorch-reference.md#a-foreign-exports-format)",
                               FailureClass.UNJUDGED)
    return verdict


__all__ = ["decide", "judge_against_float", "localize_program"]
