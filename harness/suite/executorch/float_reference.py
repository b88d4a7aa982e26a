"""A QNN cell of a user's ExecuTorch export judged against the export's own float model
(checks/float_reference.py, docs/executorch-reference.md): the program run teacher-forced over
the reference's tokens through the suite's forward runner (`pte_runner`: on an emulated HTP the
QNN parts run on QAIRT's emulator), its logits at every step against the float model's. No
reference: a skip naming what to add, never a pass."""

from __future__ import annotations

import posixpath
from pathlib import Path

import numpy as np

from harness.checks import judge_float_reference, missing_float_reference, read_float_reference
from harness.errors import ArtifactError, HarnessError, TransportError
from harness.outcomes import FailureClass
from harness.provision import provision_model
from harness.report import Detail, TestRecord
from harness.runners.executorch import EtArtifact, ExecutorchRunner
from harness.transport import Transport
from harness.verdict import Verdict


def judge_against_float(transport: Transport, runner: ExecutorchRunner, art: EtArtifact, rec: TestRecord, *,
                        label: str, local: Path, timeout: float) -> Verdict:
    """`art` (an export folder the LLM runner has run) against its reference/; `local` is the
    host folder for the tokens and the pulled logits."""
    try:
        reference = read_float_reference(art.folder)
    except ArtifactError as exc:
        return Verdict.failed(FailureClass.CHECK_FAILED, f"{label}: {exc}")
    if reference is None:
        return Verdict.skipped(f"{label} ran, but {missing_float_reference(art.folder)}")
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
    agreement = judge_float_reference(reference, np.load(run.output), label=label)
    rec.put(agreement)
    said = f"{label} against its float model ({reference.index}): {agreement.verdict}; {agreement.summary()}"
    if agreement.passed:
        return Verdict.passed(said)
    reasons = "; ".join(agreement.reasons)
    return Verdict.failed(FailureClass.DISAGREE, f"{said}" + (f" ({reasons})" if reasons else ""))


__all__ = ["judge_against_float"]
