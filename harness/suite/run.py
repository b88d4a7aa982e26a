"""Running one check instance, the same for both front doors: the suite's fit and the check's
needs first (an unmet one skips with its reason), then the check, then its verdict written
into the record (`TestRecord.set_verdict`, the one writer). pytest (suites/support.py) turns the verdict into a pass, a skip or a failed
assertion; the night (harness/lab/jobs.py, lab/export_checks.py) writes the record."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from harness.errors import HarnessError
from harness.inventory import DeviceSpec
from harness.outcomes import FailureClass
from harness.pairs import BackendPair, cpu_first
from harness.provision import ProvisionedModel, ProvisionedRuntime
from harness.report import TestRecord
from harness.suite.checks import DeviceInput, ExportInput, MatrixInput, SummaryInput, converter_missing
from harness.suite.executorch import EtInput
from harness.suite.model import Check, CheckCall, Instance, Need, Suite
from harness.suite.registry import other_suite_for
from harness.verdict import Verdict

CheckInput = ExportInput | MatrixInput | DeviceInput | SummaryInput | EtInput


def pair_skip_reason(pair: BackendPair, model: ProvisionedModel, wanted: Sequence[BackendPair] | None,
                     device: DeviceSpec | None = None, runtime: ProvisionedRuntime | None = None, *,
                     selection: str = "--backends") -> str | None:
    """Why a backend pair does not run in this session or night (None: it runs): the unmet
    need of its testcases (Need.PAIR_RUNS), so both front doors give the same reason
    (`selection`: where `wanted` came from, --backends or the plan's `backends:`)."""
    if wanted is not None and pair not in wanted:
        return f"backend {pair} not selected ({selection} {','.join(p.name for p in wanted)})"
    if pair not in model.configs:
        return f"backend {pair} has no config in this export (have: {', '.join(map(str, model.configs)) or 'none'})"
    if pair.is_qnn:
        if device is not None and not device.has_htp:
            return f"backend {pair} needs a QNN/HTP device; {device.name} is the host (soc: host)"
        if device is not None and device.emulated:  # docs/executorch-runner.md#the-htp-emulator
            return (f"backend {pair}: {device.name}'s HTP is the host's QAIRT emulator, which runs ExecuTorch's "
                    "QNN programs; MNN's QNN backend has no x86 build")
        if runtime is not None and not runtime.qnn:
            return f"backend {pair}: the runtime was pushed without QNN libraries (pass --qnn-sdk)"
    return None


def select_pairs(model: ProvisionedModel, wanted: Sequence[BackendPair] | None, device: DeviceSpec | None = None,
                 runtime: ProvisionedRuntime | None = None) -> list[BackendPair]:
    """The pairs that run, the CPU reference first (every other pair is compared with it)."""
    return cpu_first(p for p in model.configs if pair_skip_reason(p, model, wanted, device, runtime) is None)


def unmet_need(need: Need, inp: CheckInput, instance: Instance) -> str | None:
    """Why `need` is not met for this instance (None: met, or only the check can tell)."""
    if need is Need.PAIR_RUNS and isinstance(inp, MatrixInput) and instance.pair is not None:
        return inp.not_run(instance.pair)
    if need is Need.INSTRUMENTED_RUNTIME and isinstance(inp, MatrixInput) and instance.pair is not None \
            and instance.pair in inp.runs:
        if inp.runs[instance.pair].position_findings is None:
            return f"{instance.pair}: the runtime printed no [POSDBG] dumps (not an instrumented build)"
    if need is Need.CPU_CONFIG and isinstance(inp, DeviceInput):
        pair = BackendPair.cpu_reference(visual=inp.model.visual)
        if pair not in inp.model.configs:
            return f"no {pair} config in this export: the chunked-prefill check runs on the CPU reference"
    if need is Need.IMAGE and isinstance(inp, (MatrixInput, DeviceInput)) and not inp.model.visual:
        return "the export has no visual model (llm_config.json is_visual): no image prompt"
    if need is Need.MNN_CONVERTER and isinstance(inp, ExportInput):
        return converter_missing()
    return None  # ACTIVATION_QUANT: the quant check reads the export to tell


def fit_reason(suite: Suite, model_type: str) -> str | None:
    why = suite.fit_reason(model_type)
    if why is None:
        return None
    other = other_suite_for(model_type)
    return why + (f"; run suite {other} for it" if other and other != suite.name else "")


def run_check(suite: Suite, check: Check[Any], instance: Instance, inp: CheckInput, rec: TestRecord) -> Verdict:
    """Decide one testcase of `check` into `rec` (suite, pair, status, class, message, evidence)."""
    rec.suite = suite.name
    if instance.pair is not None:
        rec.backend_pair = instance.pair
    started = time.monotonic()
    try:
        why = fit_reason(suite, inp.model_type)
        why = why or next((r for n in check.needs if (r := unmet_need(n, inp, instance)) is not None), None)
        if why is None and not isinstance(inp, check.reads):  # a door handed the wrong input: a harness bug
            raise TypeError(f"check {check.name} reads {check.reads.__name__}, not {type(inp).__name__}")
        verdict = (Verdict.skipped(why) if why is not None
                   else check.run(CheckCall(inp, rec, instance, suite.deferred_classes(check))))
    except HarnessError as exc:
        # An export the check cannot read is this check's failure, named, not a crash of the door.
        verdict = Verdict.failed(FailureClass.SETUP_ERROR, str(exc))
    if not rec.duration_s:  # a check that timed no program of its own: its own time (JUnit's `time`)
        rec.duration_s = round(time.monotonic() - started, 3)
    rec.set_verdict(verdict)
    return verdict
