"""The night's job for a suite whose runner is ExecuTorch (`Suite.runner` RunnerKind.EXECUTORCH,
e.g. a plan's `- name: executorch_qnn`): the suite's checks on the claimed device, each testcase
decided by `harness.suite.run_check` on the input `harness.suite.executorch.input` builds, as the
pytest door (suites/executorch_qnn) builds it, so both give the same testcase names and
verdicts.

Plan options used: `runtime_dir` (a real device's folder with qnn_llama_runner; may contain
{htp_arch}, {soc}, {device}; not needed on an emulated HTP or the host), `qnn_sdk` (the host
QNN for an emulated HTP, or the SDK for a device's QNN libraries), `timeout_s`, `seq_len` (the LLM
runner's context for a QNN program's run, prompt included, default 128: an emulated HTP runs a
large vocabulary's output layer for seconds a step, docs/etllama.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from harness.evidence import Provenance, Timing
from harness.lab.context import DeviceContext
from harness.lab.export_checks import device_path
from harness.provision import ProvisionedRuntime, provision_runtime
from harness.report import TestRecord
from harness.suite import Scope, run_check
from harness.suite.executorch import build_et_input


def executorch_job(ctx: DeviceContext) -> Iterator[TestRecord]:
    options = {**ctx.plan.options, **ctx.entry.model.options, **ctx.entry.suite.options}
    suite = ctx.entry.suite.suite
    sdk = Path(device_path(str(options["qnn_sdk"]), ctx.device)) if options.get("qnn_sdk") else None
    device_runtime = None
    if options.get("runtime_dir") and not ctx.device.emulated:
        runtime_dir = device_path(str(options["runtime_dir"]), ctx.device)

        def device_runtime() -> ProvisionedRuntime:
            return provision_runtime(ctx.transport, runtime_dir, qnn_sdk=sdk, need_qnn=ctx.device.has_htp,
                                     qnn_sdk_option=f"options.qnn_sdk in {ctx.plan.path}")

    work = ctx.out_dir / "executorch" / ctx.entry.model.name
    work.mkdir(parents=True, exist_ok=True)
    done: list[TestRecord] = []  # the localize check reads its format's cell among them
    inp = build_et_input(ctx.transport, ctx.entry.model.path, work=work, device_runtime=device_runtime,
                         qnn_sdk=sdk, timeout=float(options.get("timeout_s", ctx.entry.suite.timeout_s)),
                         runtime_option=f"options.runtime_dir in {ctx.plan.path}", siblings=lambda: done,
                         localize=ctx.entry.suite.localize, expected_cpu_ops=ctx.entry.suite.expected_cpu_ops,
                         quant_budgets=ctx.entry.suite.budgets_for(ctx.entry.model.name), allow_unjudged=ctx.entry.suite.allow_unjudged,
                         seq_len=int(options.get("seq_len", 128)))
    for check in suite.checks:
        if check.scope in (Scope.EXPORT, Scope.SUMMARY):
            continue  # the ExecuTorch suite has none; the night runs those elsewhere
        for inst in suite.instances(check, visual=False, case_ids=[]):
            if ctx.stopping:
                return
            # the plan's model name, not the program's file name the check stamps: two exported
            # models' testcases stay apart in the records and JUnit (classname device.suite.model)
            rec = TestRecord(name=check.testcase(inst), suite=ctx.entry.suite.name, device=ctx.device.name,
                             model=ctx.entry.model.name, soc_model=ctx.device.soc_model, htp_arch=ctx.device.htp_arch)
            if ctx.device.emulated:
                rec.put(Timing(ctx.device.timing))
            rec.put(Provenance(ctx.device.tier))  # the tier it ran on; a QNN cell's check adds QAIRT and sha256
            if ctx.already_done(rec.name):
                continue
            run_check(suite, check, inst, inp, rec)
            done.append(rec)
            yield rec
    inp.cleanup()


__all__ = ["executorch_job"]
