"""Helpers for lab tests: local-transport devices (real shell commands in tmp folders),
a switch that unplugs a device's link, and a job that runs a backend matrix as shell
commands and turns their output into records."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from harness.errors import DeviceOfflineError
from harness.inventory import DeviceSpec
from harness.lab import DeviceContext
from harness.outcomes import FailureClass
from harness.report import TestRecord
from harness.transport import NO_RETRY, DeviceFacts, LocalTransport, RawExec
from harness.verdict import Verdict

SOCS = ["SM8750", "SM8650", "SA8295", "SM8550"]


@dataclass
class Switch:
    """Per-device link faults for FaultyLocal: `unplug(name, calls)` fails the next `calls`
    commands (None: for good); `facts[name]` adds health facts (battery, boot...)."""

    failing: dict[str, int | None] = field(default_factory=dict)
    facts: dict[str, dict[str, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def unplug(self, name: str, calls: int | None = None) -> None:
        with self.lock:
            self.failing[name] = calls

    def take(self, name: str) -> bool:
        """True when this command must fail."""
        with self.lock:
            if name not in self.failing:
                return False
            left = self.failing[name]
            if left is None:
                return True
            if left <= 1:
                del self.failing[name]
            else:
                self.failing[name] = left - 1
            return True


class FaultyLocal(LocalTransport):
    switch: Switch

    def _exec(self, command: str, timeout: float | None) -> RawExec:
        if self.switch.take(self.device.name):
            raise DeviceOfflineError(f"{self.device.name}: device offline (link unplugged by the test)")
        return super()._exec(command, timeout)

    def device_facts(self) -> DeviceFacts:
        facts = super().device_facts()
        said = self.switch.facts.get(self.device.name, {})
        return replace(facts, **{k: _FACT_TYPES[k](v) for k, v in said.items()})


# What a test may make a device say (Switch.facts), in DeviceFacts' own types.
_FACT_TYPES: dict[str, Callable[[str], Any]] = {
    "battery_pct": int, "battery_temp_c": float, "boot_completed": lambda v: v == "1"}


def faulty_factory(switch: Switch) -> Callable[[DeviceSpec], FaultyLocal]:
    def open_(device: DeviceSpec) -> FaultyLocal:
        t = FaultyLocal(device, retry=NO_RETRY)
        t.switch = switch
        return t

    return open_


def write_inventory(root: Path, n: int) -> Path:
    devices = []
    for i in range(n):
        devices.append({"name": f"dev{i}", "transport": "local", "soc": SOCS[i % len(SOCS)], "htp": "emulator",
                        "work_dir": str(root / f"dev{i}"), "tags": ["phone" if i % 2 == 0 else "board", "nightly"]})
    path = root / "devices.yaml"
    path.write_text(yaml.safe_dump({"devices": devices}), encoding="utf-8")
    return path


def write_plan(root: Path, **overrides) -> Path:
    (root / "exports" / "tiny").mkdir(parents=True, exist_ok=True)
    (root / "runtime").mkdir(parents=True, exist_ok=True)  # the shell jobs run no llm_demo from it
    plan = {
        "name": "test-night",
        "tags": ["nightly"],
        "models": {"tiny": {"path": "exports/tiny"}},
        "suites": [{"name": "matrix", "runner": "llm_demo", "models": ["tiny"], "backends": ["qnn", "cpu"]}],
        "health": {"min_free_mb": 1},
        "locks": {"dir": "locks", "wait_s": 5},
        "recovery": {"reconnect_s": 2, "max_faults": 2},
        "options": {"runtime_dir": "runtime"},
    }
    plan.update(overrides)
    path = root / "nightly.yaml"
    path.write_text(yaml.safe_dump(plan), encoding="utf-8")
    return path


_SPEED = re.compile(r"(prefill|decode): ([0-9.]+) tok/s")


@dataclass
class ShellJob:
    """Each backend pair of the entry is one test: a real shell command on the device that
    prints speeds and a text. `scripts[(device, pair)]` overrides a command (e.g. a crash);
    `before[(device, test, attempt)]` runs a hook first (e.g. unplug the link)."""

    sleep_s: float = 0.0
    scripts: dict[tuple[str, str], str] = field(default_factory=dict)
    before: dict[tuple[str, str, int], Callable[[], None]] = field(default_factory=dict)
    calls: list[tuple[str, str, int]] = field(default_factory=list)

    def __call__(self, ctx: DeviceContext):
        for pair in ctx.entry.suite.backends:
            name = f"{ctx.entry.model.name}[{pair}]"
            if ctx.already_done(name):
                continue
            hook = self.before.get((ctx.device.name, name, ctx.attempt))
            if hook:
                hook()
            self.calls.append((ctx.device.name, name, ctx.attempt))
            decode = 10.0 + 5 * int(ctx.device.name[-1]) + (3 if pair == "qnn" else 0)
            script = self.scripts.get((ctx.device.name, pair.name)) or (
                f"sleep {self.sleep_s}; echo 'prefill: {decode * 8:.1f} tok/s'; echo 'decode: {decode:.1f} tok/s'; "
                "echo 'The capital of France is Paris.'")
            res = ctx.transport.shell(["sh", "-c", script], timeout=120)
            speeds = {k: float(v) for k, v in _SPEED.findall(res.stdout)}
            text = "\n".join(ln for ln in res.stdout.splitlines() if not _SPEED.match(ln))
            rec = TestRecord(name=name, suite=ctx.entry.suite.name, device=ctx.device.name, model=ctx.entry.model.name,
                             backend_pair=pair, text=text, duration_s=res.duration_s,
                             prefill_tps=speeds.get("prefill"), decode_tps=speeds.get("decode"))
            if not res.ok:
                rec.set_verdict(Verdict.failed(FailureClass.CRASH if res.signal else FailureClass.RUNTIME_ERROR,
                                               f"exited {res.exit_code}"))
                rec.log_excerpt = (res.stdout + res.stderr)[-2000:]
            yield rec
