"""Is a device fit to run tonight? The transport's DeviceFacts, judged against thresholds.

Each transport gathers its device's facts its own way (harness/transport/facts.py); this
module only judges them (`judge`, pure) and never asks which transport spoke. Battery and
temperature are judged only where the device reports them (a board on ssh has neither).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.errors import HarnessError, TransportError
from harness.transport import DeviceFacts, LinkState, ReadsFacts, link_state_of


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
    facts: dict[str, str] = field(default_factory=dict)  # DeviceFacts.as_dict(): shown and recorded
    state: LinkState = LinkState.UNKNOWN

    def summary(self) -> str:
        if self.ok:
            shown = [f"{k}={self.facts[k]}" for k in ("free_mb", "battery_pct", "battery_temp_c") if k in self.facts]
            return "healthy" + (f" ({', '.join(shown)})" if shown else "")
        return "; ".join(self.reasons)


def judge(device: str, facts: DeviceFacts, policy: HealthPolicy) -> list[str]:
    """Reasons a device with these facts is unfit (empty: fit). Unknown facts are not judged."""
    reasons = []
    if policy.require_boot_completed and facts.boot_completed is False:
        reasons.append(f"{device}: boot not completed; wait for the device to finish booting")
    free = facts.free_mb
    if free is not None and free < policy.min_free_mb:
        reasons.append(f"{device}: only {free:.0f} MB free in {facts.free_path or 'the work folder'} "
                       f"(need {policy.min_free_mb:.0f} MB); clean the device")
    level = facts.battery_pct
    if level is not None and level < policy.min_battery_pct:
        reasons.append(f"{device}: battery at {level:.0f}% (need {policy.min_battery_pct:.0f}%); charge it")
    temp = facts.battery_temp_c
    if temp is not None and temp > policy.max_battery_temp_c:
        reasons.append(f"{device}: battery at {temp:.1f} C (limit {policy.max_battery_temp_c:.1f} C); let it cool")
    return reasons


def check_device(transport: ReadsFacts, policy: HealthPolicy) -> HealthVerdict:
    """Ask the device for its facts (one round trip; faults become reasons, not exceptions),
    then judge them."""
    name = transport.device.name
    try:
        facts = transport.device_facts()
    except TransportError as exc:
        return HealthVerdict(device=name, ok=False, reasons=[str(exc)], state=link_state_of(exc))
    except HarnessError as exc:  # a shell or df answering something unreadable
        return HealthVerdict(device=name, ok=False, reasons=[f"{name}: health probe failed: {exc}"],
                             state=LinkState.BROKEN)
    reasons = judge(name, facts, policy)
    return HealthVerdict(device=name, ok=not reasons, reasons=reasons, facts=facts.as_dict(), state=LinkState.OK)
