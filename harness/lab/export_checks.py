"""The checks that need no device (Scope.EXPORT: export shapes, activation quantization), run
once per export per night before any device is claimed. Each check's verdict is recorded on
every device the export would run on; a failing one says it was decided once for the export
and which devices it fails it on (harness/suite/, docs/ARCHITECTURE.md "Suites")."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from harness.errors import HarnessError
from harness.export import open_export
from harness.inventory import DeviceSpec
from harness.lab.plan import Plan, PlanEntry
from harness.report import TestRecord
from harness.suite import ExportInput, Instance, Scope, run_check
from harness.verdict import Verdict


def device_path(template: str, device: DeviceSpec) -> Path:
    """A plan path for one device: {htp_arch}, {soc}, {device} filled in."""
    return Path(template.format(htp_arch=device.htp_arch, soc=device.soc_model, device=device.name))


def _sdk(plan: Plan, entry: PlanEntry, device: DeviceSpec) -> Path | None:
    options = {**plan.options, **entry.model.options, **entry.suite.options}
    return device_path(str(options["qnn_sdk"]), device) if options.get("qnn_sdk") else None


def _label(name: str, path: Path) -> str:
    """The model label the job's records carry ("qwen3-vl (qwen3_vl)")."""
    try:
        return f"{name} ({open_export(path).model_type})"
    except HarnessError:
        return name


def export_check_records(plan: Plan, devices: Sequence[DeviceSpec], *, run_id: str) -> list[TestRecord]:
    """One record per (plan entry, device, export check); each check runs once per export and
    SDK, whatever the number of devices, suites and repeats that share it."""
    decided: dict[tuple[str, Path, Path | None], tuple[TestRecord, Verdict]] = {}
    runs_on: dict[tuple[str, Path, Path | None], list[str]] = {}
    jobs: list[tuple[PlanEntry, DeviceSpec, tuple[str, Path, Path | None]]] = []
    for entry in plan.entries():
        suite = entry.suite.suite
        for check in (c for c in suite.checks if c.scope is Scope.EXPORT):
            for device in devices:
                path, sdk = entry.model.path_for(device), _sdk(plan, entry, device)
                key = (f"{suite.name}:{check.name}", path, sdk)
                if key not in decided:
                    rec = TestRecord(name=check.testcase(Instance()), suite=entry.suite.name, device="",
                                     model=_label(entry.model.name, path))
                    rec.extras["decided"] = "once per export, before any device was claimed"
                    decided[key] = rec, run_check(suite, check, Instance(), ExportInput(path, sdk), rec)
                if device.name not in runs_on.setdefault(key, []):
                    runs_on[key].append(device.name)
                jobs.append((entry, device, key))
    out = []
    for entry, device, key in jobs:
        made, verdict = decided[key]
        rec = copy.deepcopy(made)
        if verdict.is_bad:
            rec.set_verdict(replace(verdict, message=(
                f"{verdict.message}\n[export check, run once for {key[1].name} before any device was "
                f"claimed: it fails this export on every device it would run on: {', '.join(runs_on[key])}]")))
        rec.device, rec.soc_model, rec.htp_arch = device.name, device.soc_model, device.htp_arch
        if plan.repeats > 1:
            rec.name = f"{rec.name}#{entry.repeat}"
            rec.stamp(repeat=entry.repeat)
        rec.stamp(plan_entry=entry.id, run_id=run_id, transport=device.transport.name)
        out.append(rec)
    return out
