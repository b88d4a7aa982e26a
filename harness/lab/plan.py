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
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessError, InventoryError
from harness.inventory import DeviceSpec, Inventory
from harness.lab.exports.parse import parse_exports
from harness.lab.exports.spec import ExportsSpec
from harness.lab.health import HealthPolicy
from harness.pairs import ALL_NAMES
from harness.runners.base import RunnerKind
from harness.suite import Suite, suite_for
from harness.validation import check_keys, type_name, typed_get

BACKEND_PAIRS = ALL_NAMES  # every pair name (harness/pairs.py)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# QNN context binaries are compiled per SoC, so a model path may name the device's facts.
PATH_FIELDS = ("htp_arch", "soc", "device")
_TOP_KEYS = {"version", "name", "devices", "tags", "repeats", "models", "suites", "health", "locks",
             "recovery", "history", "options", "exports"}
_MODEL_KEYS = {"path", "kind", "options"}
_SUITE_KEYS = {"name", "runner", "models", "backends", "timeout_s", "options", "checks"}
_HEALTH_KEYS = {"min_free_mb", "min_battery_pct", "max_battery_temp_c", "require_boot_completed"}
_LOCK_KEYS = {"dir", "wait_s"}
_RECOVERY_KEYS = {"reconnect_s", "max_faults"}
_HISTORY_KEYS = {"db", "nights", "perf_drop_pct", "min_nights"}
# Lab jobs that exist (harness/lab/cli.py picks the job by runner).
RUNNERS = tuple(k.value for k in RunnerKind)
# Options the llm_demo job reads (harness/lab/jobs.py llm_matrix_job); others pass through as-is.
_PATH_OPTIONS = ("runtime_dir", "qnn_sdk")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # POSIX shell variable names
_ENV_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


class PlanError(HarnessError):
    """The plan file is unreadable or invalid (the message names file and key)."""


class NoDeviceMatched(PlanError):
    """The plan selects no device of the inventory: nothing can run (exit code 5)."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    path: Path  # may hold {htp_arch}, {soc}, {device}: one export per SoC
    kind: str = "mnn"  # mnn | executorch
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def per_device(self) -> bool:
        return "{" in str(self.path)

    def path_for(self, device: DeviceSpec) -> Path:
        if not self.per_device:
            return self.path
        return Path(str(self.path).format(htp_arch=device.htp_arch, soc=device.soc_model, device=device.name))

    def for_device(self, device: DeviceSpec) -> ModelSpec:
        return replace(self, path=self.path_for(device)) if self.per_device else self


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    runner: str
    models: tuple[str, ...]
    backends: tuple[str, ...]
    timeout_s: float = 900.0
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    checks: tuple[str, ...] = ()  # check names or groups selected (empty: every check)

    @property
    def suite(self) -> Suite:
        """The checks this entry runs: the suite its name picks, with the `checks:` selection."""
        return suite_for(self.name).select(self.checks)


@dataclass(frozen=True)
class PlanEntry:
    """One unit of work on one device: a suite run for one model (one repeat)."""

    suite: SuiteSpec
    model: ModelSpec
    repeat: int  # 1-based

    @property
    def id(self) -> str:
        return f"{self.suite.name}/{self.model.name}#{self.repeat}"

    def for_device(self, device: DeviceSpec) -> PlanEntry:
        """This entry with the model path filled in for `device`."""
        return replace(self, model=self.model.for_device(device))


@dataclass(frozen=True)
class LockSettings:
    dir: Path | None = None  # None: the caller's default (e.g. <out>/../locks)
    wait_s: float = 600.0  # how long to wait for a busy device before skipping it


@dataclass(frozen=True)
class RecoverySettings:
    reconnect_s: float = 60.0  # how long a dropped device may take to come back
    max_faults: int = 2  # transport faults tolerated per device per night


@dataclass(frozen=True)
class HistorySettings:
    db: Path | None = None
    nights: int = 7  # the regression baseline: median of the last N nights
    perf_drop_pct: float = 15.0
    min_nights: int = 3  # fewer past nights than this: no perf verdict (too noisy)


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
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    # The night's export stage (harness/lab/exports/): its models' folders exist only once it ran.
    exports: ExportsSpec | None = None

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
            for key in _PATH_OPTIONS:
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


class _Ctx:
    def __init__(self, path: Path, environ: Mapping[str, str]):
        self.path = path
        self.environ = environ

    def fail(self, key: str | None, problem: str, fix: str) -> PlanError:
        where = f"{self.path}" + (f": key {key!r}" if key else "")
        return PlanError(f"{where}: {problem}; {fix}")


def _get(ctx: _Ctx, data: dict, key: str, kind: type | tuple[type, ...], label: str, default: Any = None,
         required: bool = False) -> Any:
    return typed_get(ctx, data, key, kind, label=label, default=default, required=required)


def _positive(ctx: _Ctx, label: str, value: float | int, *, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise ctx.fail(label, f"{value} must be {'zero or ' if allow_zero else ''}positive",
                       "give a number above zero")


def _names(ctx: _Ctx, data: dict, key: str, label: str) -> tuple[str, ...]:
    raw = _get(ctx, data, key, (list, str), label, default=[])
    items = [raw] if isinstance(raw, str) else raw
    for item in items:
        if not isinstance(item, str) or not item:
            raise ctx.fail(label, f"holds {item!r}", "list non-empty names")
    return tuple(items)


def _expand_env(ctx: _Ctx, label: str, raw: str) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in ctx.environ:
            raise ctx.fail(label, f"{raw!r} uses ${name}, which is not set",
                           f"set {name} in the environment of the run or write the path out")
        return ctx.environ[name]

    return _ENV_REF_RE.sub(sub, raw)


def _plan_path(ctx: _Ctx, label: str, raw: str, base: Path) -> tuple[str, bool]:
    """A path from the plan: env vars expanded, relative to the plan's folder, device fields
    checked. Returns (absolute path or template, whether it is a per-device template)."""
    expanded = _expand_env(ctx, label, raw)
    try:
        fields_used = {f for _, f, _, _ in string.Formatter().parse(expanded) if f is not None}
    except ValueError as exc:
        raise ctx.fail(label, f"{raw!r} has broken braces ({exc})",
                       f"use {{{'}, {'.join(PATH_FIELDS)}}} or no braces") from None
    bad = sorted(fields_used - set(PATH_FIELDS))
    if bad:
        raise ctx.fail(label, f"{{{bad[0]}}} is not a device field",
                       f"use only {', '.join('{' + f + '}' for f in PATH_FIELDS)}")
    path = Path(expanded).expanduser()
    path = path if path.is_absolute() else (base / path)
    if fields_used:
        return str(path), True
    try:
        return str(path.resolve()), False
    except (RuntimeError, OSError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise ctx.fail(label, f"{path} cannot be resolved ({exc}): a symlink loop or an unreadable folder",
                       "point it at the real folder (fix or remove the link)") from None


def _parse_options(ctx: _Ctx, holder: dict, label: str, base: Path) -> dict[str, Any]:
    """`options:` (plan, model or suite level): env names, runner paths and numbers checked."""
    options = dict(_get(ctx, holder, "options", dict, label, default={}))
    if "env" in options:
        env = options["env"]
        if not isinstance(env, dict):
            raise ctx.fail(f"{label}.env", f"must be a mapping of variable to value, got {type_name(env)}",
                           "write `env: {NAME: value}`")
        for name, value in env.items():
            if not isinstance(name, str) or not _ENV_NAME_RE.match(name):
                raise ctx.fail(f"{label}.env", f"{name!r} is not a valid environment variable name",
                               "use letters, digits and '_', not starting with a digit")
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ctx.fail(f"{label}.env.{name}", f"must be a string or number, got {type_name(value)}",
                               "quote the value")
    for key in _PATH_OPTIONS:
        if key in options:
            if not isinstance(options[key], str) or not options[key]:
                raise ctx.fail(f"{label}.{key}", f"must be a path, got {type_name(options[key])}",
                               "write the folder's path")
            path, templated = _plan_path(ctx, f"{label}.{key}", options[key], base)
            if not templated and not Path(path).is_dir():
                raise ctx.fail(f"{label}.{key}", f"{path} is not a folder",
                               "point it at an existing folder (absolute, or relative to the plan file)")
            options[key] = path
    for key, integer in (("max_new_tokens", True), ("timeout_s", False)):
        if key in options:
            value = _get(ctx, options, key, int if integer else (int, float), f"{label}.{key}")
            _positive(ctx, f"{label}.{key}", value)
    return options


def _parse_models(ctx: _Ctx, raw: Any, base: Path) -> dict[str, ModelSpec]:
    if not isinstance(raw, dict) or not raw:
        raise ctx.fail("models", "must be a non-empty mapping of model name to {path: ...}",
                       "write `models: {smollm2: {path: /exports/smollm2}}`")
    models = {}
    for name, spec in raw.items():
        label = f"models.{name}"
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ctx.fail(label, "is not a valid model name", "use letters, digits, '.', '_' or '-'")
        if isinstance(spec, str):
            spec = {"path": spec}
        if not isinstance(spec, dict):
            raise ctx.fail(label, f"must be a mapping or a path, got {type_name(spec)}",
                           "write `{path: /exports/NAME}`")
        check_keys(ctx, label, spec, _MODEL_KEYS)
        raw_path = _get(ctx, spec, "path", str, f"{label}.path", required=True)
        path_text, templated = _plan_path(ctx, f"{label}.path", raw_path, base)
        path = Path(path_text)
        if not templated and not path.is_dir():
            raise ctx.fail(f"{label}.path", f"{path} is not a folder",
                           "point it at the exported model folder (absolute, or relative to the plan file)")
        kind = _get(ctx, spec, "kind", str, f"{label}.kind", default="mnn")
        if kind not in ("mnn", "executorch"):
            raise ctx.fail(f"{label}.kind", f"{kind!r} is not a model kind", "use mnn or executorch")
        options = _parse_options(ctx, spec, f"{label}.options", base)
        models[name] = ModelSpec(name=name, path=path, kind=kind, options=options)
    return models


def _parse_suites(ctx: _Ctx, raw: Any, models: dict[str, ModelSpec], base: Path) -> tuple[SuiteSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise ctx.fail("suites", "must be a non-empty list", "list at least one `- name: ...` suite")
    suites = []
    seen = set()
    for i, spec in enumerate(raw):
        label = f"suites[{i}]"
        if not isinstance(spec, dict):
            raise ctx.fail(label, f"is a {type_name(spec)}, not a mapping", "write `- name: ..., models: [...]`")
        check_keys(ctx, label, spec, _SUITE_KEYS)
        name = _get(ctx, spec, "name", str, f"{label}.name", required=True)
        if not _NAME_RE.match(name):
            raise ctx.fail(f"{label}.name", f"{name!r} is not a valid suite name", "use letters, digits, '.', '_' or '-'")
        if name in seen:
            raise ctx.fail(f"{label}.name", f"suite {name!r} appears twice", "give each suite its own name")
        seen.add(name)
        label = f"suites.{name}"
        suite_models = _names(ctx, spec, "models", f"{label}.models") or tuple(models)
        for m in suite_models:
            if m not in models:
                raise ctx.fail(f"{label}.models", f"names model {m!r} which is not under `models:` "
                               f"(known: {', '.join(models)})", "add it to `models:` or fix the name")
        # No `backends:` means every backend pair the export has configs for.
        backends = _names(ctx, spec, "backends", f"{label}.backends") or ()
        for b in backends:
            if b not in BACKEND_PAIRS:
                raise ctx.fail(f"{label}.backends", f"{b!r} is not a backend pair",
                               f"use {', '.join(BACKEND_PAIRS)} (visual/llm for VL models)")
        timeout = _get(ctx, spec, "timeout_s", (int, float), f"{label}.timeout_s", default=900.0)
        _positive(ctx, f"{label}.timeout_s", timeout)
        # A registered suite names its runner; `runner:` may only say the same.
        own = suite_for(name).runner.value
        runner = _get(ctx, spec, "runner", str, f"{label}.runner", default=own)
        if runner not in RUNNERS:
            raise ctx.fail(f"{label}.runner", f"{runner!r} has no lab job (lab jobs exist for: {', '.join(RUNNERS)})",
                           "use one of them, or run that suite with pytest suites/")
        if runner != own:
            raise ctx.fail(f"{label}.runner", f"is {runner!r} but suite {name!r} drives {own}",
                           f"remove `runner:` or write `runner: {own}`")
        checks = _names(ctx, spec, "checks", f"{label}.checks")
        try:
            suite_for(name).select(checks)
        except KeyError as exc:
            raise ctx.fail(f"{label}.checks", f"{exc.args[0]!r} is not a check of suite {name!r}",
                           f"use {', '.join(suite_for(name).words())}") from None
        suites.append(SuiteSpec(
            name=name, runner=runner, models=suite_models, backends=backends, timeout_s=float(timeout),
            options=_parse_options(ctx, spec, f"{label}.options", base), checks=checks,
        ))
    return tuple(suites)


def _section(ctx: _Ctx, data: dict, key: str, allowed: set[str]) -> dict:
    raw = _get(ctx, data, key, dict, key, default={})
    check_keys(ctx, key, raw, allowed)
    return raw


def _number(ctx: _Ctx, sec: dict, key: str, label: str, default: float, *, integer: bool = False,
            allow_zero: bool = False) -> Any:
    value = _get(ctx, sec, key, int if integer else (int, float), label, default=default)
    _positive(ctx, label, value, allow_zero=allow_zero)
    return value


def _check_runner_options(ctx: _Ctx, plan_options: dict, models: dict[str, ModelSpec],
                          suites: tuple[SuiteSpec, ...]) -> None:
    """Every llm_demo entry finds a runtime folder in its merged options (plan < model < suite)."""
    for suite in suites:
        for m in suite.models:
            merged = {**plan_options, **models[m].options, **suite.options}
            if suite.runner == "llm_demo" and "runtime_dir" not in merged:
                raise ctx.fail("options.runtime_dir", f"is missing for suite {suite.name!r} with model {m!r}",
                               "point it at the folder with llm_demo and its libraries (it may use {htp_arch}); "
                               "set it under the plan's, the model's or the suite's `options:`")


def parse_plan(data: Any, path: Path, *, environ: Mapping[str, str] = os.environ) -> Plan:
    """Validate already-parsed YAML (as loaded from `path`)."""
    ctx = _Ctx(path, environ)
    if not isinstance(data, dict):
        raise ctx.fail(None, f"the top level must be a mapping, got {type_name(data)}",
                       "start the file with `suites:` and `models:` (see examples/nightly.yaml)")
    check_keys(ctx, "", data, _TOP_KEYS)
    base = path.parent
    raw_models = data.get("models")
    models = {} if raw_models is None and data.get("exports") else _parse_models(ctx, raw_models, base)
    exports = parse_exports(ctx, data.get("exports"), base, dict(ctx.environ), set(models))
    # Exported models' folders exist once the night's export stage ran (lab/exports/stage.py).
    models.update({n: ModelSpec(n, path, kind) for n, (path, kind) in (exports.model_folders() if exports else {}).items()})
    suites = _parse_suites(ctx, data.get("suites"), models, base)
    options = _parse_options(ctx, data, "options", base)
    _check_runner_options(ctx, options, models, suites)
    repeats = _number(ctx, data, "repeats", "repeats", 1, integer=True)

    h = _section(ctx, data, "health", _HEALTH_KEYS)
    health = HealthPolicy(
        min_free_mb=_number(ctx, h, "min_free_mb", "health.min_free_mb", HealthPolicy.min_free_mb, allow_zero=True),
        min_battery_pct=_number(ctx, h, "min_battery_pct", "health.min_battery_pct", HealthPolicy.min_battery_pct,
                                allow_zero=True),
        max_battery_temp_c=_number(ctx, h, "max_battery_temp_c", "health.max_battery_temp_c",
                                   HealthPolicy.max_battery_temp_c),
        require_boot_completed=_get(ctx, h, "require_boot_completed", bool, "health.require_boot_completed",
                                    default=True),
    )
    lk = _section(ctx, data, "locks", _LOCK_KEYS)
    lock_dir = _get(ctx, lk, "dir", str, "locks.dir")
    locks = LockSettings(
        dir=None if lock_dir is None else (base / Path(_expand_env(ctx, "locks.dir", lock_dir)).expanduser()),
        wait_s=float(_number(ctx, lk, "wait_s", "locks.wait_s", LockSettings.wait_s, allow_zero=True)),
    )
    rc = _section(ctx, data, "recovery", _RECOVERY_KEYS)
    recovery = RecoverySettings(
        reconnect_s=float(_number(ctx, rc, "reconnect_s", "recovery.reconnect_s", RecoverySettings.reconnect_s,
                                  allow_zero=True)),
        max_faults=_number(ctx, rc, "max_faults", "recovery.max_faults", RecoverySettings.max_faults,
                           integer=True, allow_zero=True),
    )
    hs = _section(ctx, data, "history", _HISTORY_KEYS)
    db = _get(ctx, hs, "db", str, "history.db")
    history = HistorySettings(
        db=None if db is None else (base / Path(_expand_env(ctx, "history.db", db)).expanduser()),
        nights=_number(ctx, hs, "nights", "history.nights", HistorySettings.nights, integer=True),
        perf_drop_pct=float(_number(ctx, hs, "perf_drop_pct", "history.perf_drop_pct", HistorySettings.perf_drop_pct)),
        min_nights=_number(ctx, hs, "min_nights", "history.min_nights", HistorySettings.min_nights, integer=True),
    )
    name = _get(ctx, data, "name", str, "name", default=path.stem)
    return Plan(
        path=path, name=name, models=models, suites=suites,
        devices=_names(ctx, data, "devices", "devices"), tags=_names(ctx, data, "tags", "tags"),
        repeats=repeats, health=health, locks=locks, recovery=recovery, history=history,
        options=options, exports=exports,
    )


def load_plan(path: Path | str, *, environ: Mapping[str, str] = os.environ) -> Plan:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"{path}: plan file not found; pass --plan with the path of your nightly.yaml") from None
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the plan ({exc.strerror}); check the path and permissions") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PlanError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}; fix the syntax") from None
    return parse_plan(data, path.resolve(), environ=environ)
