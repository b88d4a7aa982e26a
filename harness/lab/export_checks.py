"""The checks that need no device (Scope.EXPORT: export shapes, activation quantization), run
once per export per night before any device is claimed. Each check's verdict is recorded on
every device that starts the entry it belongs to; a failing one says it was decided once for
the export and on how many devices it fails it (harness/suite/, docs/ARCHITECTURE.md "Suites")."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.errors import HarnessError
from harness.export import open_export
from harness.inventory import DeviceSpec
from harness.lab.plan import Plan, PlanEntry
from harness.report import Detail, TestRecord
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


_Key = tuple[str, Path, Path | None]  # (suite:check, the export, the SDK): one decision each


@dataclass
class ExportCheckSet:
    """The device-less checks' verdicts, each decided once per export before any claim. A
    device's copies are made when its worker starts the entry they belong to (`records_for`):
    a device the stop (or a quarantine) came before gets none, and a failing check names how
    many devices it fails the export on, never the devices themselves (a record per device
    listing every device grew as devices squared: 820 MB at 10 000 devices)."""

    run_id: str
    repeats: int
    decided: dict[_Key, tuple[TestRecord, Verdict, int]] = field(default_factory=dict)  # record, verdict, devices
    jobs: dict[str, list[tuple[PlanEntry, _Key]]] = field(default_factory=dict)  # by device name

    def failing(self) -> list[TestRecord]:
        """The decided records that did not pass (once per export, whatever the devices)."""
        return [rec for rec, verdict, _ in self.decided.values() if verdict.is_bad]

    def records_for(self, device: DeviceSpec, entry_id: str | None = None) -> list[TestRecord]:
        """`device`'s copies of the decided records (of one plan entry when given)."""
        out = []
        for entry, key in self.jobs.get(device.name, ()):
            if entry_id is not None and entry.id != entry_id:
                continue
            made, verdict, devices = self.decided[key]
            rec = copy.deepcopy(made)
            if verdict.is_bad:
                rec.set_verdict(replace(verdict, message=(
                    f"{verdict.message}\n[export check, run once for {key[1].name} before any device was "
                    f"claimed: it fails this export on every device it would run on ({devices})]")))
            rec.device, rec.soc_model, rec.htp_arch = device.name, device.soc_model, device.htp_arch
            if self.repeats > 1:
                rec.name = f"{rec.name}#{entry.repeat}"
                rec.stamp(repeat=entry.repeat)
            rec.stamp(plan_entry=entry.id, run_id=self.run_id, transport=device.transport.name)
            out.append(rec)
        return out


def decide_export_checks(plan: Plan, devices: Sequence[DeviceSpec], *, run_id: str) -> ExportCheckSet:
    """Each check run once per export and SDK, whatever the number of devices, suites and
    repeats that share it; which device gets which copy, kept for `records_for`."""
    checks = ExportCheckSet(run_id, plan.repeats)
    runs_on: dict[_Key, set[str]] = {}
    for entry in plan.entries():
        suite = entry.suite.suite
        for check in (c for c in suite.checks if c.scope is Scope.EXPORT):
            for device in devices:
                path, sdk = entry.model.path_for(device), _sdk(plan, entry, device)
                key = (f"{suite.name}:{check.name}", path, sdk)
                if key not in checks.decided:
                    rec = TestRecord(name=check.testcase(Instance()), suite=entry.suite.name, device="",
                                     model=_label(entry.model.name, path))
                    rec.keep(Detail.DECIDED, "once per export, before any device was claimed")
                    checks.decided[key] = rec, run_check(suite, check, Instance(), ExportInput(path, sdk), rec), 0
                runs_on.setdefault(key, set()).add(device.name)
                checks.jobs.setdefault(device.name, []).append((entry, key))
    for key, names in runs_on.items():
        rec, verdict, _ = checks.decided[key]
        checks.decided[key] = rec, verdict, len(names)
    return checks


def export_check_records(plan: Plan, devices: Sequence[DeviceSpec], *, run_id: str) -> list[TestRecord]:
    """One record per (plan entry, device, export check): every device's copies at once."""
    checks = decide_export_checks(plan, devices, run_id=run_id)
    return [rec for device in devices for rec in checks.records_for(device)]
