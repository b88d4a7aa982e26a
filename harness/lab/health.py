"""Is a device fit to run tonight? Facts from the transport, judged against thresholds.

Gathering (`gather_facts`, talks to the device) and judging (`judge`, pure) are apart so
the policy can be tested on fact dicts and the gathering on real links. Battery and
temperature are judged only where the device reports them (a board on ssh has neither).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.errors import DeviceUnauthorizedError, HarnessError, TransportError
from harness.transport.base import Transport, free_bytes_from_df

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


# One round trip for everything the lab judges: a night starts every device's health check at
# once, and each device command is a process spawn on the device (and in the virtual lab a
# sandbox on the host); 1 command instead of 5-7 keeps a 16-device night flat (benchmarks/lab.py). `$1` is the work folder, which may not exist before the first push:
# the probe walks up to the nearest folder that does (df needs an existing path).
_PROBE = """echo ok
if command -v getprop >/dev/null 2>&1; then echo "@boot=$(getprop sys.boot_completed)"; fi
d=$1
while [ -n "$d" ] && [ "$d" != / ] && [ ! -d "$d" ]; do d=${d%/*}; done
echo "@dir=${d:-/}"
echo @df
df -k "${d:-/}"
if command -v dumpsys >/dev/null 2>&1; then
  echo @dumpsys; dumpsys battery 2>/dev/null
else
  echo "@capacity=$(cat @SYSFS@/capacity 2>/dev/null)"; echo "@temp=$(cat @SYSFS@/temp 2>/dev/null)"
fi
""".replace("@SYSFS@", _SYSFS_BATTERY)
_MARK = re.compile(r"^@(boot|dir|capacity|temp)=(.*)$")


def _battery(marks: dict[str, str], dumpsys: str | None) -> dict[str, str]:
    """Battery level and temperature: `dumpsys battery` on Android, sysfs elsewhere."""
    out: dict[str, str] = {}
    if dumpsys:
        level = re.search(r"^\s*level:\s*(\d+)", dumpsys, re.M)
        temp = re.search(r"^\s*temperature:\s*(-?\d+)", dumpsys, re.M)
        if level:
            out["battery_pct"] = level.group(1)
        if temp:  # tenths of a degree C
            out["battery_temp_c"] = f"{int(temp.group(1)) / 10:.1f}"
        if out:
            return out
    if marks.get("capacity", "").isdigit():
        out["battery_pct"] = marks["capacity"]
    if marks.get("temp", "").lstrip("-").isdigit():
        out["battery_temp_c"] = f"{int(marks['temp']) / 10:.1f}"
    return out


def gather_facts(transport: Transport) -> tuple[str, dict[str, str], list[str]]:
    """(state, facts, problems) from one device. Link faults become problems, not exceptions."""
    name = transport.device.name
    try:
        res = transport.quick(["sh", "-c", _PROBE, "health-probe", transport.device.work_dir], timeout=30,
                              check=False)
    except TransportError as exc:
        return ("unauthorized" if isinstance(exc, DeviceUnauthorizedError) else "unreachable"), {}, [str(exc)]
    lines = res.stdout.splitlines()
    if not lines or lines[0].strip() != "ok":
        return "broken-shell", {}, [f"{name}: the health probe printed {res.stdout[:200]!r} (exit {res.exit_code})"]
    marks: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines[1:]:  # df and dumpsys lines never start with "@"
        if line.strip() in ("@df", "@dumpsys"):
            current = sections.setdefault(line.strip()[1:], [])
        elif (m := _MARK.match(line.strip())) is not None:
            marks[m.group(1)] = m.group(2).strip()
        elif current is not None:
            current.append(line)
    dumpsys = "\n".join(sections["dumpsys"]) if "dumpsys" in sections else None
    facts: dict[str, str] = {}
    if "boot" in marks:
        facts["boot_completed"] = marks["boot"]
    facts.update(_battery(marks, dumpsys))
    path = marks.get("dir") or "/"
    facts["free_path"] = path
    try:
        free = free_bytes_from_df("\n".join(sections.get("df", [])), f"{name}: `df -k {path}`")
    except HarnessError as exc:  # df printing something unexpected
        return "broken", facts, [f"{name}: health probe failed: {exc}"]
    facts["free_mb"] = f"{free / (1 << 20):.0f}"
    return ("device" if transport.kind == "adb" else "ok"), facts, []


def check_device(transport: Transport, policy: HealthPolicy) -> HealthVerdict:
    state, facts, problems = gather_facts(transport)
    reasons = problems or judge(transport.device.name, facts, policy)
    return HealthVerdict(device=transport.device.name, ok=not reasons, reasons=reasons, facts=facts, state=state)
