"""Device claims shared between processes and hosts through one folder.

Each device has `<dir>/<name>.lock` (held with flock through `filelock`; the kernel drops
it when the holder dies, so a crashed run never leaves a device claimed) and
`<dir>/<name>.holder.json` saying who holds it (host, pid, run id, since) for
`harness lab status`. The holder file is separate because waiters truncate the lock file.
On a folder shared between hosts the lock needs a filesystem with working flock (local
disks, NFSv4, CIFS with locking); a holder record whose lock is free is reported as stale.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from collections.abc import Callable

import filelock

from harness.errors import HarnessError


class DeviceBusy(HarnessError):
    """Another run holds the device and did not let go within the wait."""


@dataclass(frozen=True)
class LockHolder:
    host: str
    pid: int
    run_id: str
    since: float  # time.time()
    user: str = ""
    purpose: str = ""  # night | push | pytest

    def describe(self, now: float | None = None) -> str:
        age = max(0.0, (now or time.time()) - self.since)
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        what = f"{self.purpose} " if self.purpose else ""
        return f"{what}host {self.host} pid {self.pid} run {self.run_id} since {when} ({_age(age)})"


@dataclass(frozen=True)
class LockState:
    device: str
    held: bool
    holder: LockHolder | None = None

    @property
    def stale(self) -> bool:
        """A holder record is left but nobody holds the lock (its run was killed)."""
        return not self.held and self.holder is not None

    def describe(self) -> str:
        if self.held:
            return f"held by {self.holder.describe()}" if self.holder else "held (no holder record)"
        if self.holder:
            return f"free (stale record: {self.holder.describe()})"
        return "free"


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _paths(lock_dir: Path, device: str) -> tuple[Path, Path]:
    return lock_dir / f"{device}.lock", lock_dir / f"{device}.holder.json"


def read_holder(path: Path) -> LockHolder | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return LockHolder(host=str(data["host"]), pid=int(data["pid"]), run_id=str(data["run_id"]),
                          since=float(data["since"]), user=str(data.get("user", "")),
                          purpose=str(data.get("purpose", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or half-written: nobody to name


class DeviceLock:
    """Claim one device for one run. Use as a context manager or acquire()/release()."""

    def __init__(self, lock_dir: Path, device: str, run_id: str, *, purpose: str = ""):
        self.lock_dir = Path(lock_dir)
        self.device = device
        self.run_id = run_id
        self.purpose = purpose
        self.lock_path, self.holder_path = _paths(self.lock_dir, device)
        self._lock = filelock.FileLock(str(self.lock_path), thread_local=False)

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def acquire(self, wait_s: float, *, say: Callable[[str], None] | None = None,
                cancel: threading.Event | None = None) -> LockHolder:
        """Take the device, waiting up to wait_s (saying who holds it). Raises DeviceBusy."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + wait_s
        first = True
        while True:
            remaining = deadline - time.monotonic()
            try:
                # First a plain try (so the wait is announced before it starts), then short
                # slices so a stop request is noticed while waiting.
                self._lock.acquire(timeout=0 if first else max(0.0, min(0.5, remaining)))
                break
            except filelock.Timeout:
                pass
            holder = read_holder(self.holder_path)
            who = holder.describe() if holder else "another run (no holder record yet)"
            if cancel is not None and cancel.is_set():
                raise DeviceBusy(f"{self.device}: stopped while waiting for the device lock held by {who}")
            if time.monotonic() >= deadline:
                raise DeviceBusy(
                    f"{self.device}: in use by {who}; skipped after waiting {wait_s:.0f} s "
                    f"(lock {self.lock_path}). Wait for that run, or wait longer (`locks.wait_s` in the plan, "
                    "`--lock-timeout` for `harness push` and pytest)"
                )
            if first and say is not None:
                say(f"{self.device}: in use by {who}; waiting up to {wait_s:.0f} s")
            first = False
        me = LockHolder(host=socket.gethostname(), pid=os.getpid(), run_id=self.run_id, since=time.time(),
                        user=os.environ.get("USER", ""), purpose=self.purpose)
        tmp = self.holder_path.with_suffix(f".tmp-{os.getpid()}-{threading.get_ident()}")
        tmp.write_text(json.dumps(asdict(me)), encoding="utf-8")
        os.replace(tmp, self.holder_path)  # atomic: readers never see half a record
        return me

    def release(self) -> None:
        if not self._lock.is_locked:
            return
        holder = read_holder(self.holder_path)
        if holder is not None and holder.run_id == self.run_id and holder.pid == os.getpid():
            self.holder_path.unlink(missing_ok=True)
        self._lock.release(force=True)

    def __enter__(self) -> DeviceLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_state(lock_dir: Path, device: str) -> LockState:
    """Who holds a device now. Probes the lock (a momentary non-blocking take) for the truth."""
    lock_path, holder_path = _paths(Path(lock_dir), device)
    holder = read_holder(holder_path)
    if not lock_path.exists():
        return LockState(device, held=False, holder=holder)
    probe = filelock.FileLock(str(lock_path), thread_local=False)
    try:
        probe.acquire(timeout=0)
    except filelock.Timeout:
        return LockState(device, held=True, holder=read_holder(holder_path) or holder)
    probe.release(force=True)
    return LockState(device, held=False, holder=holder)
