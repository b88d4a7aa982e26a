"""The lab's job for a suite entry: iterate the suite's checks (harness/suite/) on the claimed
device, each testcase decided by `harness.suite.run_check`, the call the pytest suites make,
so both doors give the same testcase names, records and verdicts.

The checks that need no device (Scope.EXPORT) are not run here: the night runs them once per
export before any device is claimed (`SuiteJob.export_checks`, lab/export_checks.py). Here:
provision the entry's model and runtime, run the backend matrix pair by pair through the
shared pipeline (harness/pipeline.py) with the per-cell and per-pair checks, then the
per-device checks (chunked prefill).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.evidence import Provenance, Timing
from harness.inventory import DeviceSpec
from harness.lab.context import DeviceContext
from harness.lab.et_job import executorch_job
from harness.lab.export_checks import ExportCheckSet, decide_export_checks, device_path
from harness.lab.plan import Plan
from harness.pairs import BackendPair, cpu_first
from harness.pipeline import PairRun, judge_matrix, run_matrix
from harness.provision import ProvisionedModel, provision_model, provision_runtime
from harness.report import TestRecord
from harness.runners import PromptCase, RunnerKind, write_test_image
from harness.runners.llm_demo import LlmDemoRunner
from harness.suite import (
    Check,
    DeviceInput,
    Instance,
    MatrixInput,
    Scope,
    Suite,
    SummaryInput,
    fit_reason,
    pair_skip_reason,
    run_check,
    suite_cases,
)


def _record(ctx: DeviceContext, check: Check[Any], instance: Instance, label: str) -> TestRecord:
    rec = TestRecord(name=check.testcase(instance), suite=ctx.entry.suite.name, device=ctx.device.name,
                     soc_model=ctx.device.soc_model, htp_arch=ctx.device.htp_arch, model=label)
    if ctx.device.emulated:
        rec.put(Timing(ctx.device.timing))  # its times are the emulator's, not device speed
    rec.put(Provenance(ctx.device.tier))  # the tier it ran on; a check that read more (QAIRT, sha256) replaces it
    return rec


def _matrix_records(ctx: DeviceContext, suite: Suite, checks: Sequence[Check[Any]], inp: MatrixInput,
                    pairs: Sequence[BackendPair], case_ids: Sequence[str], label: str) -> Iterator[TestRecord]:
    """The cell and pair checks' testcases of `pairs`, decided on `inp`."""
    for check in checks:
        for inst in suite.instances(check, visual=inp.model.visual, case_ids=case_ids):
            if inst.pair not in pairs:
                continue
            rec = _record(ctx, check, inst, label)
            if ctx.already_done(rec.name):
                continue
            run_check(suite, check, inst, inp, rec)
            yield rec


def llm_matrix_job(ctx: DeviceContext) -> Iterator[TestRecord]:
    """The entry's suite on this device: cell, pair and device checks, one record each.

    Plan options used: `runtime_dir` (may contain {htp_arch}, {soc}, {device}), `qnn_sdk`,
    `max_new_tokens`, `timeout_s`, `env` (extra environment for the runner); the suite's
    `backends` select pairs, its `checks` the checks."""
    options = {**ctx.plan.options, **ctx.entry.model.options, **ctx.entry.suite.options}
    if "runtime_dir" not in options:
        raise HarnessError(f"plan {ctx.plan.name!r}: options.runtime_dir is missing; point it at the folder "
                           "with llm_demo and its libraries (it may use {htp_arch})")
    suite = ctx.entry.suite.suite
    on_device = [c for c in suite.checks if c.scope not in (Scope.EXPORT, Scope.SUMMARY)]
    summary = [c for c in suite.checks if c.scope is Scope.SUMMARY]
    if not on_device and not summary:
        return
    sdk = device_path(str(options["qnn_sdk"]), ctx.device) if options.get("qnn_sdk") else None
    model = provision_model(ctx.transport, ctx.entry.model.path, qnn_sdk=sdk)
    label = f"{ctx.entry.model.name} ({model.model_type})"
    made: list[TestRecord] = []
    for rec in _on_device(ctx, suite, on_device, model, label, options, sdk):
        made.append(rec)
        yield rec
    # The export as a whole, from every record of it on this device (this attempt's, earlier
    # attempts' and the export checks'), as the pytest door's summary tests read theirs.
    for check in summary:
        if ctx.stopping:
            return
        rec = _record(ctx, check, Instance(), label)
        if not ctx.already_done(rec.name):
            run_check(suite, check, Instance(), SummaryInput(model.model_type, [*ctx.prior, *made]), rec)
            yield rec


def _on_device(ctx: DeviceContext, suite: Suite, on_device: Sequence[Check[Any]], model: ProvisionedModel, label: str,
               options: dict[str, Any], sdk: Path | None) -> Iterator[TestRecord]:
    """The matrix (cell and pair checks), then the device checks."""
    visual = suite.visual if suite.visual is not None else model.visual
    image = write_test_image(ctx.out_dir / "inputs" / "red-square.png") if visual else None
    cases = suite_cases(visual, image)
    case_ids = [c.id for c in cases]
    wanted = list(ctx.entry.suite.backends) or None
    if wanted and not any(p in model.configs for p in wanted):
        raise HarnessError(f"{ctx.plan.path}: suite {ctx.entry.suite.name!r} asks for backends "
                           f"{', '.join(map(str, wanted))} but {ctx.entry.model.name} has configs for "
                           f"{', '.join(map(str, model.configs)) or 'none'}; fix `backends:` (visual/llm pairs for VL models)")
    selection = f"`backends:` of suite {ctx.entry.suite.name}"
    matrix_checks = [c for c in on_device if c.scope in (Scope.CELL, Scope.PAIR)]
    device_checks = [c for c in on_device if c.scope is Scope.DEVICE]
    fits = fit_reason(suite, model.model_type) is None
    all_pairs = suite.pairs(model.visual)
    # The host runs the CPU pairs; its QNN cells are skipped with the reason the suites give.
    pairs = cpu_first(p for p in all_pairs
                      if fits and matrix_checks and pair_skip_reason(p, model, wanted, ctx.device) is None)

    def why_not(pair: BackendPair) -> str | None:
        return pair_skip_reason(pair, model, wanted, ctx.device, selection=selection)

    # Testcases of pairs that do not run (and every one when the suite does not fit): skipped.
    idle = MatrixInput(model, {}, {}, why_not)
    yield from _matrix_records(ctx, suite, matrix_checks, idle, [p for p in all_pairs if p not in pairs],
                               case_ids, label)
    if not fits:
        for check in device_checks:
            rec = _record(ctx, check, Instance(), label)
            if not ctx.already_done(rec.name):
                run_check(suite, check, Instance(), DeviceInput(None, model), rec)
                yield rec
        return
    if not pairs and not device_checks:
        return
    # The CPU pairs need no QNN library: they are required only when a QNN pair runs.
    runtime = provision_runtime(ctx.transport, device_path(str(options["runtime_dir"]), ctx.device),
                                qnn_sdk=sdk, need_qnn=any(p.is_qnn for p in pairs),
                                qnn_sdk_option=f"options.qnn_sdk in {ctx.plan.path}")
    runner = LlmDemoRunner(ctx.transport, runtime, model)
    env = {str(k): str(v) for k, v in dict(options.get("env") or {}).items()}
    max_new_tokens = int(options.get("max_new_tokens", 64))
    timeout = float(options.get("timeout_s", ctx.entry.suite.timeout_s))
    yield from _pairs(ctx, suite, matrix_checks, model, runner, pairs, cases, label,
                      max_new_tokens=max_new_tokens, timeout=timeout, env=env)
    # One input for every device check: the chunked CPU runs it caches serve them all, as the
    # pytest door's session fixture does.
    device_input = DeviceInput(runner, model, image, timeout, env or None)
    for check in device_checks:
        if ctx.stopping:
            return
        rec = _record(ctx, check, Instance(), label)
        if not ctx.already_done(rec.name):
            run_check(suite, check, Instance(), device_input, rec)
            yield rec
    runner.cleanup()


def _pairs(ctx: DeviceContext, suite: Suite, checks: Sequence[Check[Any]], model: ProvisionedModel,
           runner: LlmDemoRunner, pairs: Sequence[BackendPair], cases: Sequence[PromptCase], label: str, *,
           max_new_tokens: int, timeout: float, env: dict[str, str]) -> Iterator[TestRecord]:
    """Pair by pair, CPU reference first, so results arrive as they are made and a retry after a
    dropped link re-runs only what was not delivered; the reference is re-run when a later
    pair needs it."""
    case_ids = [c.id for c in cases]
    names = {p: [c.testcase(i) for c in checks for i in suite.instances(c, visual=model.visual, case_ids=case_ids)
                 if i.pair == p] for p in pairs}

    def done(pair: BackendPair) -> bool:
        return all(ctx.already_done(n) for n in names[pair])

    reference: dict[BackendPair, PairRun] = {}
    for i, pair in enumerate(pairs):
        is_reference = pair.is_cpu_reference
        needed_as_reference = is_reference and not all(done(p) for p in pairs[i + 1:])
        if done(pair) and not needed_as_reference:
            continue
        if ctx.stopping:
            return
        runs = {**reference, **run_matrix(runner, cases, [pair], max_new_tokens=max_new_tokens, timeout=timeout,
                                          extra_env=env or None)}
        judged = {(j.pair, j.case.id): j for j in judge_matrix(runs, cases, system=model.system_prompt)
                  if j.pair == pair}
        inp = MatrixInput(model, runs, judged, lambda p: None, ctx.entry.model.path, ctx.entry.suite.expected_cpu_ops,
                          runner.runtime.qairt_build)
        yield from _matrix_records(ctx, suite, checks, inp, [pair], case_ids, label)
        if is_reference:
            reference = {pair: runs[pair]}


class SuiteJob:
    """The night's job over a plan's suites: `__call__` on a claimed device (llm_matrix_job, or
    executorch_job for a suite that drives ExecuTorch),
    `export_checks` once per night before any claim (lab/scheduler.py calls it)."""

    def __call__(self, ctx: DeviceContext) -> Iterator[TestRecord]:
        """The job of the runner the entry's suite drives (runners/base.py RunnerKind)."""
        if ctx.entry.suite.suite.runner is RunnerKind.EXECUTORCH:
            return executorch_job(ctx)
        return llm_matrix_job(ctx)

    def export_checks(self, plan: Plan, devices: Sequence[DeviceSpec], run_id: str) -> ExportCheckSet:
        return decide_export_checks(plan, devices, run_id=run_id)


suite_job = SuiteJob()
__all__ = ["SuiteJob", "llm_matrix_job", "suite_job"]
