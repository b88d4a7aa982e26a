"""The nightly plan's parts as data (harness/lab/plan/load.py reads them from `nightly.yaml`): its
errors, a model, a suite, one entry of work, and the locks/recovery/history/concurrency settings."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.checks import QuantBudget
from harness.errors import HarnessError
from harness.inventory import DeviceSpec
from harness.pairs import BackendPair
from harness.suite import Suite, suite_for

# QNN context binaries are compiled per SoC, so a model path may name the device's facts.
PATH_FIELDS = ("htp_arch", "soc", "device")


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
    backends: tuple[BackendPair, ...]
    timeout_s: float = 900.0
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    checks: tuple[str, ...] = ()  # check names or groups selected (empty: every check)
    localize: bool = False  # localize every format's program, not only a failed cell's (docs/localize.md)
    # Ops its QNN cells may run on the CPU beyond the suite's defaults (docs/placement.md); None: the defaults.
    expected_cpu_ops: dict[str, int] | None = field(default=None, hash=False, compare=False)
    # The quantization's quality budget per format (docs/executorch-reference.md#the-verdict): under
    # "" for every model of the entry, under a model's name for that model alone; None: the defaults.
    quant_budget: dict[str, dict[str, QuantBudget]] | None = field(default=None, hash=False, compare=False)
    allow_unjudged: bool = False  # a night whose QNN cells were all left unjudged may still pass

    def budgets_for(self, model: str) -> dict[str, QuantBudget] | None:
        """The entry's budgets for `model`: its own over the entry's."""
        if self.quant_budget is None:
            return None
        return {**self.quant_budget.get("", {}), **self.quant_budget.get(model, {})}

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
class ConcurrencySettings:
    # Devices worked at once (harness/lab/pool.py); None: min(devices, pool.DEFAULT_WORKERS).
    workers: int | None = None
