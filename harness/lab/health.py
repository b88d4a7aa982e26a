"""Is a device fit to run tonight? Facts from the transport, judged against thresholds.

Gathering (`gather_facts`, talks to the device) and judging (`judge`, pure) are apart so
the policy can be tested on fact dicts and the gathering on real links. Battery and
temperature are judged only where the device reports them (a board on ssh has neither).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from harness.errors import DeviceUnauthorizedError, HarnessError, TransportError
from harness.transport.base import Transport

_SYSFS_BATTERY = "/sys/class/power_supply/battery"


@dataclass(frozen=True)
class HealthPolicy:
    min_free_mb: float = 256
    min_battery_pct: float = 15
    max_battery_temp_c: float = 45.0
    require_boot_completed: bool = True


@dataclass
class HealthVerdict:
    device: str
    ok: bool
    reasons: list[str] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)
    state: str = "unknown"

    def summary(self) -> str:
        if self.ok:
            shown = [f"{k}={self.facts[k]}" for k in ("free_mb", "battery_pct", "battery_temp_c") if k in self.facts]
            return "healthy" + (f" ({', '.join(shown)})" if shown else "")
        return "; ".join(self.reasons)


def _num(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def judge(device: str, facts: dict[str, str], policy: HealthPolicy) -> list[str]:
    """Reasons a device with these facts is unfit (empty: fit). Absent facts are not judged."""
    reasons = []
    boot = facts.get("boot_completed")
    if policy.require_boot_completed and boot is not None and boot.strip() != "1":
        reasons.append(f"{device}: boot not completed (sys.boot_completed={boot.strip() or 'unset'}); "
                       "wait for the device to finish booting")
    free = _num(facts.get("free_mb"))
    if free is not None and free < policy.min_free_mb:
        reasons.append(f"{device}: only {free:.0f} MB free in {facts.get('free_path', 'the work folder')} "
                       f"(need {policy.min_free_mb:.0f} MB); clean the device")
    level = _num(facts.get("battery_pct"))
    if level is not None and level < policy.min_battery_pct:
        reasons.append(f"{device}: battery at {level:.0f}% (need {policy.min_battery_pct:.0f}%); charge it")
    temp = _num(facts.get("battery_temp_c"))
    if temp is not None and temp > policy.max_battery_temp_c:
        reasons.append(f"{device}: battery at {temp:.1f} C (limit {policy.max_battery_temp_c:.1f} C); let it cool")
    return reasons


def _existing_ancestor(transport: Transport, path: str) -> str:
    # df needs an existing path; the work folder may not exist before the first push.
    while path not in ("/", ""):
        if transport.exists(path):
            return path
        path = posixpath.dirname(path.rstrip("/"))
    return "/"


def _battery(transport: Transport) -> dict[str, str]:
    """Battery level and temperature: `dumpsys battery` on Android, sysfs elsewhere."""
    out: dict[str, str] = {}
    if transport.kind == "adb":
        res = transport.shell(["dumpsys", "battery"], timeout=20)
        if res.ok:
            level = re.search(r"^\s*level:\s*(\d+)", res.stdout, re.M)
            temp = re.search(r"^\s*temperature:\s*(-?\d+)", res.stdout, re.M)
            if level:
                out["battery_pct"] = level.group(1)
            if temp:  # tenths of a degree C
                out["battery_temp_c"] = f"{int(temp.group(1)) / 10:.1f}"
            if out:
                return out
    cap = transport.shell(["cat", f"{_SYSFS_BATTERY}/capacity"], timeout=20)
    if cap.ok and cap.stdout.strip().isdigit():
        out["battery_pct"] = cap.stdout.strip()
    temp = transport.shell(["cat", f"{_SYSFS_BATTERY}/temp"], timeout=20)
    if temp.ok and temp.stdout.strip().lstrip("-").isdigit():
        out["battery_temp_c"] = f"{int(temp.stdout.strip()) / 10:.1f}"
    return out


def gather_facts(transport: Transport) -> tuple[str, dict[str, str], list[str]]:
    """(state, facts, problems) from one device. Link faults become problems, not exceptions."""
    name = transport.device.name
    try:
        report = transport.health()
    except TransportError as exc:
        return ("unauthorized" if isinstance(exc, DeviceUnauthorizedError) else "unreachable"), {}, [str(exc)]
    facts = dict(report.facts)
    # Transports name some facts their own way (adb: battery_level, work_dir_free_bytes).
    if "battery_pct" not in facts and "battery_level" in facts:
        facts["battery_pct"] = facts["battery_level"]
    if "free_mb" not in facts and facts.get("work_dir_free_bytes", "").isdigit():
        facts["free_mb"] = f"{int(facts['work_dir_free_bytes']) / (1 << 20):.0f}"
        facts["free_path"] = transport.device.work_dir
    if not report.reachable or report.problems:
        problems = list(report.problems) or [f"{name}: not reachable (state {report.state})"]
        return report.state, facts, problems
    try:
        if "boot_completed" not in facts and transport.kind == "adb":
            facts["boot_completed"] = transport.getprop("sys.boot_completed")
        if "free_mb" not in facts:
            path = _existing_ancestor(transport, transport.device.work_dir)
            facts["free_path"] = path
            facts["free_mb"] = f"{transport.free_bytes(path) / (1 << 20):.0f}"
        if "battery_pct" not in facts and "battery_temp_c" not in facts:
            facts.update(_battery(transport))
    except TransportError as exc:
        return "unreachable", facts, [str(exc)]
    except HarnessError as exc:  # e.g. df printing something unexpected
        return "broken", facts, [f"{name}: health probe failed: {exc}"]
    return report.state, facts, []


def check_device(transport: Transport, policy: HealthPolicy) -> HealthVerdict:
    state, facts, problems = gather_facts(transport)
    reasons = problems or judge(transport.device.name, facts, policy)
    return HealthVerdict(device=transport.device.name, ok=not reasons, reasons=reasons, facts=facts, state=state)
