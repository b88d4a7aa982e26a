"""`harness lab status`: every device, its health, and who holds it: the flock folder's
holder, or for a device with a labgrid place, the coordinator's (a person's
`labgrid-client acquire` included)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.inventory import DeviceSpec, Inventory
from harness.lab.claims import claim_states, unclaimed_address
from harness.lab.context import TransportFactory
from harness.lab.health import HealthPolicy, HealthVerdict, check_device
from harness.lab.pool import Pool, pool_size
from harness.report import text_table
from harness.transport import LinkState, open_transport


@dataclass
class DeviceStatus:
    device: DeviceSpec
    claim: str  # who holds it, in words (its labgrid place's holder, or the flock folder's)
    health: HealthVerdict | None = None  # None: not checked
    health_note: str = ""  # e.g. "no answer within 20 s"

    def health_text(self) -> str:
        if self.health is None:
            return self.health_note or "not checked"
        return self.health.summary()


def _check(device: DeviceSpec, policy: HealthPolicy, factory: TransportFactory, out: dict[str, HealthVerdict], key: str) -> None:
    try:
        device = unclaimed_address(device)
        transport = factory(device)
    except HarnessError as exc:
        out[key] = HealthVerdict(device.name, ok=False, reasons=[str(exc)], state=LinkState.UNREACHABLE)
        return
    try:
        out[key] = check_device(transport, policy)
    finally:
        try:
            transport.close()
        except Exception:  # a dead link's close failing changes nothing here
            pass


def collect_status(inventory: Inventory, lock_dir: Path, *, health: bool = True,
                   policy: HealthPolicy | None = None, timeout_s: float = 30.0, workers: int | None = None,
                   transport_factory: TransportFactory = open_transport) -> list[DeviceStatus]:
    """Status of every device. Health checks run on a pool of `workers` threads (default
    min(devices, 32), harness/lab/pool.py) within one deadline of `timeout_s` for them all:
    a device not checked by then says so, however large the lab."""
    devices = list(inventory.devices.values())
    holders = claim_states(devices, lock_dir=Path(lock_dir))
    statuses = [DeviceStatus(d, holders.get(d.name, "unknown")) for d in devices]
    if health:
        results: dict[str, HealthVerdict] = {}
        # A reservation's device has no address until a place is allocated to a claim.
        checkable = [d for d in devices if d.labgrid is None or d.labgrid.place is not None]
        give_up = threading.Event()  # the deadline passed: no probe starts after it
        rule = policy or HealthPolicy()
        pool = Pool(checkable, lambda d: _check(d, rule, transport_factory, results, d.name),
                    size=pool_size(workers, len(checkable)), stop=give_up, name="status").start()
        try:
            pool.wait(timeout_s)
        finally:
            give_up.set()  # also on Ctrl-C: the pool's queued probes are dropped, its threads are daemons
        # Sets of names: 10 000 devices looked up in a list is 10^8 comparisons.
        probed, names = {d.name for d in pool.taken()}, {d.name for d in checkable}
        for s in statuses:
            s.health = results.get(s.device.name)
            if s.health is None:
                s.health_note = _unchecked_note(s.device.name in names, s.device.name in probed, timeout_s)
    return statuses


def _unchecked_note(checkable: bool, probed: bool, timeout_s: float) -> str:
    if not checkable:
        return "not checked: a reservation's place is known only once allocated"
    if probed:
        return f"no answer within {timeout_s:.0f} s"
    return f"not checked: the {timeout_s:.0f} s for the whole lab ran out first"


def format_status(statuses: list[DeviceStatus]) -> str:
    rows = [("DEVICE", "TRANSPORT", "SOC", "HEALTH", "LOCK")]
    for s in statuses:
        d = s.device
        health = ("ok: " if s.health is not None and s.health.ok else "FAIL: " if s.health is not None else "") \
            + s.health_text()
        rows.append((d.name, d.transport.status_where(d), f"{d.soc_model} {d.htp_arch}", health, s.claim))
    return text_table(rows)


def lab_status(inventory: Inventory, lock_dir: Path, *, health: bool = True, policy: HealthPolicy | None = None,
               timeout_s: float = 30.0, workers: int | None = None,
               transport_factory: TransportFactory = open_transport) -> str:
    """The `harness lab status` table: devices, health, and who holds which lock."""
    return format_status(collect_status(inventory, lock_dir, health=health, policy=policy, timeout_s=timeout_s,
                                        workers=workers, transport_factory=transport_factory))
