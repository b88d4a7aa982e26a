"""What a device says about its fitness to run, in one spelling for every transport.

Each transport fills a `DeviceFacts` its own way (adb: getprop and `dumpsys battery`; ssh
and local: sysfs and df); callers such as `harness/lab/health.py` only judge it and never
ask which transport spoke. None means "this device cannot tell", never "zero".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The Linux power-supply class: capacity in %, temp in tenths of a degree C.
SYSFS_BATTERY = "/sys/class/power_supply/battery"

# Every fact in one round trip (a lab night asks all its devices at once, and each device
# command is a process spawn there). Fixed text; `$1` is the work folder, which may not exist
# before the first push: walk up to the nearest folder that does (df needs an existing path).
# What the device has decides what it says: getprop and dumpsys on Android (over adb or ssh),
# sysfs elsewhere and as dumpsys' fallback. Marker lines start with "@"; df and dumpsys never do.
PROBE_SCRIPT = """echo ok
if command -v getprop >/dev/null 2>&1; then echo "@boot=$(getprop sys.boot_completed)"; fi
d=$1
while [ -n "$d" ] && [ "$d" != / ] && [ ! -d "$d" ]; do d=${d%/*}; done
echo "@dir=${d:-/}"
echo @df
df -k "${d:-/}"
if command -v dumpsys >/dev/null 2>&1; then echo @dumpsys; dumpsys battery 2>/dev/null; fi
echo "@capacity=$(cat @SYSFS@/capacity 2>/dev/null)"
echo "@temp=$(cat @SYSFS@/temp 2>/dev/null)"
""".replace("@SYSFS@", SYSFS_BATTERY)
_MARK = re.compile(r"^@(boot|dir|capacity|temp)=(.*)$")


@dataclass(frozen=True)
class Battery:
    pct: int | None = None
    temp_c: float | None = None

    @property
    def known(self) -> bool:
        return self.pct is not None or self.temp_c is not None


@dataclass(frozen=True)
class DeviceFacts:
    """The condition of one device at one moment; None where the device cannot tell."""

    boot_completed: bool | None = None  # Android sys.boot_completed; None off Android
    free_bytes: int | None = None  # free space for the work folder...
    free_path: str | None = None  # ...measured here (its nearest existing folder)
    battery_pct: int | None = None
    battery_temp_c: float | None = None

    @property
    def free_mb(self) -> float | None:
        return None if self.free_bytes is None else self.free_bytes / (1 << 20)

    def as_dict(self) -> dict[str, str]:
        """The known facts as text, for records and `lab status` (unknown ones left out)."""
        out: dict[str, str] = {}
        if self.boot_completed is not None:
            out["boot_completed"] = "1" if self.boot_completed else "0"
        if self.free_mb is not None:
            out["free_mb"] = f"{self.free_mb:.0f}"
        if self.free_path is not None:
            out["free_path"] = self.free_path
        if self.battery_pct is not None:
            out["battery_pct"] = str(self.battery_pct)
        if self.battery_temp_c is not None:
            out["battery_temp_c"] = f"{self.battery_temp_c:.1f}"
        return out


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else None


def parse_dumpsys_battery(text: str) -> Battery:
    """`dumpsys battery`: `level: 85` (%) and `temperature: 312` (tenths of a degree C)."""
    level = temp = None
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if sep and key == "level":
            level = _int(value)
        elif sep and key == "temperature":
            temp = _int(value)
    return Battery(pct=level, temp_c=None if temp is None else temp / 10)


def parse_sysfs_battery(capacity: str, temp: str) -> Battery:
    """The texts of `capacity` and `temp` under SYSFS_BATTERY (empty when absent)."""
    tenths = _int(temp)
    return Battery(pct=_int(capacity), temp_c=None if tenths is None else tenths / 10)


def parse_df_free(text: str) -> int | None:
    """Free bytes from POSIX `df -k PATH` as toybox and coreutils print it: a header, then
    one row that a long device name may wrap (Filesystem 1K-blocks Used Available ...)."""
    rows = [ln for ln in text.splitlines() if ln.strip()]
    if len(rows) < 2:
        return None
    nums = [c for c in " ".join(rows[1:]).split() if c.isdigit()]
    return int(nums[2]) * 1024 if len(nums) >= 3 else None


class ProbeUnreadable(ValueError):
    """The probe's output is not what PROBE_SCRIPT prints (a broken shell, an odd df)."""


def parse_probe(stdout: str) -> DeviceFacts:
    """DeviceFacts from PROBE_SCRIPT's output; ProbeUnreadable when the shell or df is broken."""
    lines = stdout.splitlines()
    if not lines or lines[0].strip() != "ok":
        raise ProbeUnreadable(f"the shell printed {stdout[:200]!r} instead of the probe's `ok`")
    marks: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines[1:]:
        if line.strip() in ("@df", "@dumpsys"):
            current = sections.setdefault(line.strip()[1:], [])
        elif (m := _MARK.match(line.strip())) is not None:
            marks[m.group(1)] = m.group(2).strip()
            current = None
        elif current is not None:
            current.append(line)
    df = "\n".join(sections.get("df", []))
    free = parse_df_free(df)
    if free is None:
        raise ProbeUnreadable(f"cannot read free space from `df -k {marks.get('dir', '/')}`: {df!r}")
    battery = parse_dumpsys_battery("\n".join(sections["dumpsys"])) if "dumpsys" in sections else Battery()
    if not battery.known:
        battery = parse_sysfs_battery(marks.get("capacity", ""), marks.get("temp", ""))
    return DeviceFacts(boot_completed=marks["boot"] == "1" if "boot" in marks else None, free_bytes=free,
                       free_path=marks.get("dir") or "/", battery_pct=battery.pct, battery_temp_c=battery.temp_c)


__all__ = [
    "PROBE_SCRIPT",
    "SYSFS_BATTERY",
    "Battery",
    "DeviceFacts",
    "ProbeUnreadable",
    "parse_df_free",
    "parse_dumpsys_battery",
    "parse_probe",
    "parse_sysfs_battery",
]
