"""Running one check instance, the same for both front doors: the suite's fit and the check's
needs first (an unmet one skips with its reason), then the check, then its verdict written
into the record. pytest (suites/support.py) turns the verdict into a pass, a skip or a failed
assertion; the night (harness/lab/jobs.py, lab/export_checks.py) writes the record."""

from __future__ import annotations

from harness.errors import HarnessError
from harness.outcomes import FailureClass, Status
from harness.pairs import BackendPair
from harness.report.records import TestRecord
from harness.suite.checks import DeviceInput, ExportInput, MatrixInput, SummaryInput, converter_missing
from harness.suite.et_checks import EtInput
from harness.suite.model import Check, Instance, Need, Suite, Verdict
from harness.suite.registry import other_suite_for

CheckInput = ExportInput | MatrixInput | DeviceInput | SummaryInput | EtInput


def unmet_need(need: Need, inp: CheckInput, instance: Instance) -> str | None:
    """Why `need` is not met for this instance (None: met, or only the check can tell)."""
    if need is Need.PAIR_RUNS and isinstance(inp, MatrixInput) and instance.pair is not None:
        return inp.not_run(instance.pair)
    if need is Need.INSTRUMENTED_RUNTIME and isinstance(inp, MatrixInput) and instance.pair is not None \
            and instance.pair in inp.runs:
        if inp.runs[instance.pair].position_findings is None:
            return f"{instance.pair}: the runtime printed no [POSDBG] dumps (not an instrumented build)"
    if need is Need.CPU_CONFIG and isinstance(inp, DeviceInput):
        pair = BackendPair.cpu_reference(visual=inp.model.visual).name
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


def apply(rec: TestRecord, verdict: Verdict) -> None:
    rec.status = verdict.status.value
    if verdict.failure_class is not None:
        rec.failure_class = verdict.failure_class.value
    if verdict.message:
        rec.message = verdict.message
    if verdict.warning is not None:
        rec.extras["warning"] = verdict.warning.value


def run_check(suite: Suite, check: Check, instance: Instance, inp: CheckInput, rec: TestRecord) -> Verdict:
    """Decide one testcase of `check` into `rec` (suite, pair, status, class, message, evidence)."""
    rec.suite = suite.name
    if instance.pair is not None:
        rec.backend_pair = instance.pair
    try:
        why = fit_reason(suite, inp.model_type)
        why = why or next((r for n in check.needs if (r := unmet_need(n, inp, instance)) is not None), None)
        verdict = (Verdict.skipped(why) if why is not None
                   else check.run(inp, rec, instance, suite.deferred_classes(check)))
    except HarnessError as exc:
        # An export the check cannot read is this check's failure, named, not a crash of the door.
        verdict = Verdict(Status.FAILED, FailureClass.SETUP_ERROR, str(exc))
    apply(rec, verdict)
    return verdict
