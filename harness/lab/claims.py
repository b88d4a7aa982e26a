"""The one seam through which anything that drives a device claims it first.

`lab run` (one claim per device per night), `harness push`, and a pytest `--device`
session all go through `open_claim`, with the claim folder resolved once by `claim_dir`,
so every run on a lab meets every other run in the same place. `lab status` reads the
same places through `claim_states` and `unclaimed_address`.

Two engines: the flock folder (`harness.lab.locks.DeviceLock`), the default, enough for
one lab host (or several sharing a folder with working flock); and labgrid's coordinator
(`harness/lab/labgrid/`) for a device whose devices.yaml entry names a labgrid place:
the multi-host engine, where people's `labgrid-client acquire` counts too. Callers never
name an engine.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from harness.inventory import DeviceSpec, Inventory
from harness.lab.locks import LOCK_DIR_ENV, DeviceLock, lock_state, lock_states

__all__ = ["DeviceClaim", "FileClaim", "claim_dir", "claim_states", "open_claim", "unclaimed_address"]

SayFn = Callable[[str], None]


class DeviceClaim(Protocol):
    """One holder's claim on one device. acquire() before touching it, release() in finally."""

    device: DeviceSpec

    def acquire(self, wait_s: float, *, say: SayFn | None = None,
                cancel: threading.Event | None = None) -> DeviceSpec:
        """Take the device, waiting up to wait_s (saying who holds it, once). Returns the spec
        to connect with (an engine may resolve the address). Raises DeviceBusy naming the
        holder when the wait runs out or `cancel` is set."""
        ...

    def release(self) -> None:
        """Let go (idempotent; safe after a failed acquire)."""
        ...

    def holder(self) -> str | None:
        """Who holds the device now (this claim included), for messages; None: nobody."""
        ...


class FileClaim:
    """The flock-folder engine: `<lock_dir>/<device>.lock` plus a holder record."""

    def __init__(self, device: DeviceSpec, lock_dir: Path, run_id: str, purpose: str):
        self.device = device
        self.lock_dir = Path(lock_dir)
        self._lock = DeviceLock(self.lock_dir, device.name, run_id, purpose=purpose)

    def acquire(self, wait_s: float, *, say: SayFn | None = None,
                cancel: threading.Event | None = None) -> DeviceSpec:
        self._lock.acquire(wait_s, say=say, cancel=cancel)
        return self.device

    def release(self) -> None:
        self._lock.release()

    def holder(self) -> str | None:
        state = lock_state(self.lock_dir, self.device.name)
        if not state.held:
            return None
        return state.holder.describe() if state.holder else "another run (no holder record yet)"

    def __enter__(self) -> FileClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def claim_dir(inventory: Inventory, plan_lock_dir: Path | None = None, cli_lock_dir: Path | str | None = None,
              *, environ: Mapping[str, str] = os.environ) -> Path:
    """The claim folder, absolute: `--lock-dir`, else $HARNESS_LOCK_DIR, else the plan's
    `locks.dir`, else devices.yaml's `locks.dir`, else `locks/` beside devices.yaml (the file
    every run on a lab shares). Relative CLI/env paths are taken from the current folder once,
    here. A plan whose `locks.dir` differs from devices.yaml's is refused: pushes and pytest
    sessions, which have no plan, would claim elsewhere and never meet the night."""
    beside = inventory.locks_dir or Path(inventory.path).resolve().parent / "locks"
    if plan_lock_dir is not None and inventory.locks_dir is not None \
            and Path(plan_lock_dir).expanduser().resolve() != inventory.locks_dir:
        from harness.lab.plan import PlanError  # the plan reader (yaml schema, pairs): only here

        raise PlanError(f"the plan's locks.dir ({plan_lock_dir}) differs from {inventory.path}'s locks.dir "
                        f"({inventory.locks_dir}); pushes and pytest runs claim devices in the latter. "
                        "Remove `locks:` from the plan (or make both the same folder)")
    for chosen in (cli_lock_dir, environ.get(LOCK_DIR_ENV) or None, plan_lock_dir):
        if chosen is not None and str(chosen) != "":
            return Path(chosen).expanduser().resolve()
    return beside


def open_claim(device: DeviceSpec, *, lock_dir: Path, run_id: str, purpose: str) -> DeviceClaim:
    """A claim on `device` for `purpose` (night | push | pytest), not yet acquired: its
    labgrid place when devices.yaml gives it one, else the flock folder."""
    if device.labgrid is not None:
        from harness.lab.labgrid import LabgridClaim  # labgrid is an optional extra

        return LabgridClaim(device, run_id=run_id, purpose=purpose)
    return FileClaim(device, lock_dir, run_id, purpose)


def claim_states(devices: Sequence[DeviceSpec], *, lock_dir: Path) -> dict[str, str]:
    """Who holds each device now, in words, for `harness lab status`: its labgrid place's
    holder (a person's `labgrid-client acquire` included) or the flock folder's."""
    states = lock_states(Path(lock_dir), [d.name for d in devices if d.labgrid is None])
    out = {name: state.describe() for name, state in states.items()}
    placed = [d for d in devices if d.labgrid is not None]
    if placed:
        from harness.lab.labgrid import labgrid_holders  # labgrid is an optional extra

        out.update(labgrid_holders(placed))
    return out


def unclaimed_address(device: DeviceSpec) -> DeviceSpec:
    """Where `device` answers, without claiming it (`lab status`'s read-only health check):
    the address its labgrid place publishes, else the inventory's."""
    if device.labgrid is None:
        return device
    from harness.lab.labgrid import LabgridClaim

    return LabgridClaim(device, run_id="status").peek_address()
