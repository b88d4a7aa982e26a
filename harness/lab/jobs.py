"""The lab's job for an llm_demo suite entry: provision the entry's model and runtime on the
claimed device, run the backend matrix pair by pair through the shared pipeline
(harness/pipeline.py) and yield one record per (pair, prompt), its verdict from
`pipeline.decide`, the same function the pytest suites call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from harness.errors import HarnessError
from harness.lab.scheduler import DeviceContext
from harness.pairs import cpu_first, is_cpu_reference, uses_qnn
from harness.pipeline import PairRun, judge_matrix, matrix_records, pair_skip_reason, run_matrix
from harness.provision import provision_model, provision_runtime
from harness.report.records import TestRecord
from harness.runners.cases import default_cases, write_test_image
from harness.runners.llm_demo import LlmDemoRunner


def _device_path(template: str, ctx: DeviceContext) -> Path:
    return Path(template.format(htp_arch=ctx.device.htp_arch, soc=ctx.device.soc_model, device=ctx.device.name))


def llm_matrix_job(ctx: DeviceContext) -> Iterator[TestRecord]:
    """Provision the entry's model and runtime, run the backend matrix, check, emit records.

    Plan options used: `runtime_dir` (may contain {htp_arch}, {soc}, {device}), `qnn_sdk`,
    `max_new_tokens`, `timeout_s`, `env` (extra environment for the runner); the suite's
    `backends` select pairs."""
    options = {**ctx.plan.options, **ctx.entry.model.options, **ctx.entry.suite.options}
    if "runtime_dir" not in options:
        raise HarnessError(f"plan {ctx.plan.name!r}: options.runtime_dir is missing; point it at the folder "
                           "with llm_demo and its libraries (it may use {htp_arch})")
    sdk = _device_path(str(options["qnn_sdk"]), ctx) if options.get("qnn_sdk") else None
    model = provision_model(ctx.transport, ctx.entry.model.path, qnn_sdk=sdk)
    # The export says whether it has a visual model (one rule, harness.export), not its pair names.
    image = write_test_image(ctx.out_dir / "inputs" / "red-square.png") if model.visual else None
    cases = default_cases(model.visual, image)
    pairs = [p for p in (ctx.entry.suite.backends or tuple(model.configs)) if p in model.configs]
    if not pairs:
        raise HarnessError(f"{ctx.plan.path}: suite {ctx.entry.suite.name!r} asks for backends "
                           f"{', '.join(ctx.entry.suite.backends)} but {ctx.entry.model.name} has configs for "
                           f"{', '.join(model.configs) or 'none'}; fix `backends:` (visual/llm pairs for VL models)")
    label = f"{ctx.entry.model.name} ({model.model_type})"
    # The host runs the CPU pairs; its QNN cells are skipped with the reason the suites give.
    skipped = {p: why for p in pairs if (why := pair_skip_reason(p, model, None, ctx.device)) is not None}
    for pair, why in skipped.items():
        for c in cases:
            name = f"{ctx.entry.suite.name}::{pair}::{c.id}"
            if not ctx.already_done(name):
                yield TestRecord(name=name, suite=ctx.entry.suite.name, device=ctx.device.name, status="skipped",
                                 soc_model=ctx.device.soc_model, model=label, backend_pair=pair, message=why)
    pairs = [p for p in pairs if p not in skipped]
    if not pairs:
        return
    # The CPU pairs need no QNN library: they are required only when a QNN pair runs.
    runtime = provision_runtime(ctx.transport, _device_path(str(options["runtime_dir"]), ctx),
                                qnn_sdk=sdk,
                                need_qnn=any(uses_qnn(p) for p in pairs),
                                qnn_sdk_option=f"options.qnn_sdk in {ctx.plan.path}")
    # CPU/CPU first: the reference every other pair is compared with.
    pairs = cpu_first(pairs)
    runner = LlmDemoRunner(ctx.transport, runtime, model)
    env = {str(k): str(v) for k, v in dict(options.get("env") or {}).items()}
    max_new_tokens = int(options.get("max_new_tokens", 64))
    timeout = float(options.get("timeout_s", ctx.entry.suite.timeout_s))
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
        runs = {**reference, **run_matrix(runner, cases, [pair], max_new_tokens=max_new_tokens, timeout=timeout,
                                          extra_env=env or None)}
        judged = [j for j in judge_matrix(runs, cases) if j.pair == pair]
        for rec in matrix_records(runs, judged, suite=ctx.entry.suite.name, device=ctx.device.name,
                                  soc_model=ctx.device.soc_model, htp_arch=ctx.device.htp_arch, model=label):
            if not ctx.already_done(rec.name):
                yield rec
        if is_reference:
            reference = {pair: runs[pair]}
    runner.cleanup()
