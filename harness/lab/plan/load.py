"""The nightly plan (`nightly.yaml`): which suites run which models on which devices.

A plan is validated on load the way the inventory is: every problem is one PlanError naming
the file and the key and saying what to do. The scheduler turns a plan into entries
(suite x model x repeat) and runs them in order on every matching device.

```yaml
name: nightly
devices: [oneplus13, sa8295-car]   # and/or
tags: [phone]                      # all listed tags must be on a device
repeats: 1
models:
  smollm2: {path: ../shared/models/smollm2-135m-instruct-mnn-npu16}
suites:
  - {name: matrix, runner: llm_demo, models: [smollm2], backends: [qnn, cpu]}
  - {name: qwen3_vl, models: [qwen3-vl], checks: [static, generation]}
health: {min_free_mb: 256, min_battery_pct: 15, max_battery_temp_c: 45}
locks: {dir: /srv/lab/locks, wait_s: 600}
recovery: {reconnect_s: 60, max_faults: 2}
history: {db: results/history.sqlite, nights: 7, perf_drop_pct: 15}
concurrency: {workers: 32}         # devices worked at once (default min(devices, 32))
options: {runtime_dir: "${LAB_RUNTIMES}/mnn-{htp_arch}", qnn_sdk: "${QNN_SDK_ROOT}", env: {MNN_LOG: "1"}}
```
A suite's name picks its checks (harness/suite/registry.py): `qwen3_vl` and `qwen3` run the
checks of suites/qwen3_vl and suites/qwen3, any other name the checks that fit every llm_demo
export (activation quantization, the generation matrix); `checks:` selects some of them by name
or group (`static`, `structural`).
Paths may use `$VAR`/`${VAR}` from the environment (an unset one is a plan error) and the
device fields {htp_arch}, {soc}, {device}; relative paths are taken from the plan's folder.
Everything a night needs is checked here or, for per-device paths, in `check_models` before
the first device is claimed: a plan never fails at 3 a.m. on something it could say at load.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.errors import InventoryError
from harness.inventory import DeviceSpec, Inventory
from harness.lab.health import HealthPolicy
from harness.lab.plan.bisect_spec import NightBisect, parse_bisect
from harness.lab.plan.export_spec import ExportsSpec
from harness.lab.plan.exports import localized_exports, parse_exports
from harness.lab.plan.fields import PlanCtx, get_value, read_names, read_number, read_section
from harness.lab.plan.paths import PATH_OPTIONS, expand_env, parse_options
from harness.lab.plan.specs import (
    ConcurrencySettings,
    HistorySettings,
    LockSettings,
    ModelSpec,
    NoDeviceMatched,
    PlanEntry,
    PlanError,
    RecoverySettings,
    SuiteSpec,
)
from harness.lab.plan.suites import check_runner_options, parse_models, parse_suites
from harness.validation import YamlBoundError, check_keys, load_yaml, type_name

# The plan's parts live beside this file: specs.py (data), fields.py (typed values), paths.py
# (paths, environment, options) and suites.py (models and suites).

_TOP_KEYS = {"version", "name", "devices", "tags", "repeats", "models", "suites", "health", "locks",
             "recovery", "history", "options", "exports", "concurrency", "bisect"}
_HEALTH_KEYS = {"min_free_mb", "min_battery_pct", "max_battery_temp_c", "require_boot_completed"}
_LOCK_KEYS = {"dir", "wait_s"}
_RECOVERY_KEYS = {"reconnect_s", "max_faults"}
_HISTORY_KEYS = {"db", "nights", "perf_drop_pct", "min_nights"}
_CONCURRENCY_KEYS = {"workers"}
# Each worker is a thread holding a device link; past this a host runs out of sockets and memory
# long before devices run out of work (benchmarks/lab_scale.py).
MAX_WORKERS = 1024


@dataclass(frozen=True)
class Plan:
    path: Path
    name: str
    models: dict[str, ModelSpec]
    suites: tuple[SuiteSpec, ...]
    devices: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    repeats: int = 1
    health: HealthPolicy = HealthPolicy()
    locks: LockSettings = LockSettings()
    recovery: RecoverySettings = RecoverySettings()
    history: HistorySettings = HistorySettings()
    concurrency: ConcurrencySettings = ConcurrencySettings()
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    # The night's export stage (harness/lab/exports/): its models' folders exist only once it ran.
    exports: ExportsSpec | None = None
    bisect: NightBisect | None = None  # bisect the night's new failures after its reports (docs/bisect.md)

    def entries(self) -> list[PlanEntry]:
        """Suites in file order, each model of a suite, repeated `repeats` times."""
        out = []
        for repeat in range(1, self.repeats + 1):
            for suite in self.suites:
                for m in suite.models:
                    out.append(PlanEntry(suite, self.models[m], repeat))
        return out

    def check_models(self, devices: list[DeviceSpec]) -> None:
        """Per-device model and runtime paths exist for every device (plain paths were
        checked on load), before any device is claimed."""
        exported = set(self.exports.models) if self.exports else set()
        for m in self.models.values():
            for d in devices if m.per_device and m.name not in exported else ():
                path = m.path_for(d)
                if not path.is_dir():
                    raise PlanError(f"{self.path}: key 'models.{m.name}.path': {path} (for device {d.name}) is not "
                                    "a folder; export the model for that device's SoC or leave the device out")
        holders = [("options", self.options)] + [(f"models.{m.name}.options", m.options) for m in self.models.values()] \
            + [(f"suites.{s.name}.options", s.options) for s in self.suites]
        for label, options in holders:
            for key in PATH_OPTIONS:
                template = options.get(key)
                if not isinstance(template, str) or "{" not in template:
                    continue
                for d in devices:
                    path = Path(template.format(htp_arch=d.htp_arch, soc=d.soc_model, device=d.name))
                    if not path.is_dir():
                        raise PlanError(f"{self.path}: key '{label}.{key}': {path} (for device {d.name}) is not a "
                                        "folder; provide it for that device's HTP arch or leave the device out")

    def select_devices(self, inventory: Inventory) -> list[DeviceSpec]:
        try:
            chosen = inventory.select(self.devices or None, self.tags or None)
        except InventoryError as exc:
            raise PlanError(f"{self.path}: key 'devices': {exc}") from None
        if not chosen:
            wanted = []
            if self.devices:
                wanted.append(f"names {', '.join(self.devices)}")
            if self.tags:
                wanted.append(f"all of the tags {', '.join(self.tags)}")
            raise NoDeviceMatched(
                f"{self.path}: no device in {inventory.path} matches {' and '.join(wanted) or 'the plan'}; "
                "fix `devices:`/`tags:` in the plan or the tags in the inventory"
            )
        return chosen



def parse_plan(data: object, path: Path, *, environ: Mapping[str, str] = os.environ) -> Plan:
    """Validate already-parsed YAML (as loaded from `path`)."""
    ctx = PlanCtx(path, environ)
    if not isinstance(data, dict):
        raise ctx.fail(None, f"the top level must be a mapping, got {type_name(data)}",
                       "start the file with `suites:` and `models:` (see examples/nightly.yaml)")
    check_keys(ctx, "", data, _TOP_KEYS)
    base = path.parent
    raw_models = data.get("models")
    models = {} if raw_models is None and data.get("exports") else parse_models(ctx, raw_models, base)
    exports = parse_exports(ctx, data.get("exports"), base, dict(ctx.environ), set(models))
    # Exported models' folders exist once the night's export stage ran (lab/exports/stage.py).
    models.update({n: ModelSpec(n, path, kind) for n, (path, kind) in (exports.model_folders() if exports else {}).items()})
    suites = parse_suites(ctx, data.get("suites"), models, base)
    exports = localized_exports(ctx, exports, suites)
    options = parse_options(ctx, data, "options", base)
    check_runner_options(ctx, options, models, suites)
    repeats = read_number(ctx, data, "repeats", "repeats", 1, integer=True)

    h = read_section(ctx, data, "health", _HEALTH_KEYS)
    health = HealthPolicy(
        min_free_mb=read_number(ctx, h, "min_free_mb", "health.min_free_mb", HealthPolicy.min_free_mb, allow_zero=True),
        min_battery_pct=read_number(ctx, h, "min_battery_pct", "health.min_battery_pct", HealthPolicy.min_battery_pct,
                                allow_zero=True),
        max_battery_temp_c=read_number(ctx, h, "max_battery_temp_c", "health.max_battery_temp_c",
                                   HealthPolicy.max_battery_temp_c),
        require_boot_completed=get_value(ctx, h, "require_boot_completed", bool, "health.require_boot_completed",
                                    default=True),
    )
    lk = read_section(ctx, data, "locks", _LOCK_KEYS)
    lock_dir = get_value(ctx, lk, "dir", str, "locks.dir")
    locks = LockSettings(
        dir=None if lock_dir is None else (base / Path(expand_env(ctx, "locks.dir", lock_dir)).expanduser()),
        wait_s=float(read_number(ctx, lk, "wait_s", "locks.wait_s", LockSettings.wait_s, allow_zero=True)),
    )
    rc = read_section(ctx, data, "recovery", _RECOVERY_KEYS)
    recovery = RecoverySettings(
        reconnect_s=float(read_number(ctx, rc, "reconnect_s", "recovery.reconnect_s", RecoverySettings.reconnect_s,
                                  allow_zero=True)),
        max_faults=read_number(ctx, rc, "max_faults", "recovery.max_faults", RecoverySettings.max_faults,
                           integer=True, allow_zero=True),
    )
    hs = read_section(ctx, data, "history", _HISTORY_KEYS)
    db = get_value(ctx, hs, "db", str, "history.db")
    history = HistorySettings(
        db=None if db is None else (base / Path(expand_env(ctx, "history.db", db)).expanduser()),
        nights=read_number(ctx, hs, "nights", "history.nights", HistorySettings.nights, integer=True),
        perf_drop_pct=float(read_number(ctx, hs, "perf_drop_pct", "history.perf_drop_pct", HistorySettings.perf_drop_pct)),
        min_nights=read_number(ctx, hs, "min_nights", "history.min_nights", HistorySettings.min_nights, integer=True),
    )
    name = get_value(ctx, data, "name", str, "name", default=path.stem)
    concurrency = _parse_concurrency(ctx, data)
    return Plan(
        path=path, name=name, models=models, suites=suites,
        devices=read_names(ctx, data, "devices", "devices"), tags=read_names(ctx, data, "tags", "tags"),
        repeats=repeats, health=health, locks=locks, recovery=recovery, history=history,
        concurrency=concurrency, options=options, exports=exports, bisect=parse_bisect(ctx, data, base),
    )


def _parse_concurrency(ctx: PlanCtx, data: Mapping[str, object]) -> ConcurrencySettings:
    cc = read_section(ctx, data, "concurrency", _CONCURRENCY_KEYS)
    if cc.get("workers") is None:
        return ConcurrencySettings()
    workers = read_number(ctx, cc, "workers", "concurrency.workers", 1, integer=True)
    if workers > MAX_WORKERS:
        raise ctx.fail("concurrency.workers", f"{workers} is more than {MAX_WORKERS}",
                       f"give at most {MAX_WORKERS} (devices past the pool's size wait for a free worker)")
    return ConcurrencySettings(workers=workers)


def load_plan(path: Path | str, *, environ: Mapping[str, str] = os.environ) -> Plan:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"{path}: plan file not found; pass --plan with the path of your nightly.yaml") from None
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the plan ({exc.strerror}); check the path and permissions") from None
    try:
        data = load_yaml(text)
    except YamlBoundError as exc:
        raise PlanError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PlanError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}; fix the syntax") from None
    return parse_plan(data, path.resolve(), environ=environ)
