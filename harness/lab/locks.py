"""Device claims shared between processes and hosts through one folder.

Each device has `<dir>/<name>.lock` (held with flock(2); the kernel drops
it when the holder dies, so a crashed run never leaves a device claimed) and
`<dir>/<name>.holder.json` saying who holds it (host, pid, run id, since) for
`harness lab status`. The holder file is separate because waiters truncate the lock file.
On a folder shared between hosts the lock needs a filesystem with working flock (local
disks, NFSv4, CIFS with locking); a holder record whose lock is free is reported as stale.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.errors import HarnessError, OutputPathError

# Set it to move every run's claims (e.g. a folder shared by lab hosts); --lock-dir wins over it.
LOCK_DIR_ENV = "HARNESS_LOCK_DIR"


class DeviceBusy(HarnessError):
    """Another run holds the device and did not let go within the wait."""


def wait_longer(purpose: str) -> str:
    """How the front door that claims for `purpose` is told to wait longer for a busy device."""
    if purpose == "push":
        return "pass a longer `--lock-timeout` to `harness push`"
    if purpose == "pytest":
        return "pass a longer `--lock-timeout` to pytest"
    if purpose == "night":
        return "raise `locks.wait_s` in the plan"
    return "raise `locks.wait_s` in the plan (`--lock-timeout` for `harness push` and pytest)"


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


class _Flock:
    """An exclusive flock(2) on one file, as `filelock.FileLock` took it (O_CREAT|O_TRUNC,
    polled every 50 ms), from the standard library: the package cost ~14 ms of every
    `harness push` start-up. Each open() is its own lock, so two in one process exclude
    each other (lock_state's probe relies on that); acquiring a held one is a no-op."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float) -> bool:
        """True once held; False when still held by someone else after `timeout` seconds."""
        if self._fd is not None:
            return True
        deadline = time.monotonic() + timeout
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.05)
                continue
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _names(device: str) -> tuple[str, str]:
    """A device's lock file and holder record, in the claim folder."""
    return f"{device}.lock", f"{device}.holder.json"


def _paths(lock_dir: Path, device: str) -> tuple[Path, Path]:
    lock, holder = _names(device)
    return lock_dir / lock, lock_dir / holder


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
        self._lock = _Flock(self.lock_path)

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def acquire(self, wait_s: float, *, say: Callable[[str], None] | None = None,
                cancel: threading.Event | None = None) -> LockHolder:
        """Take the device, waiting up to wait_s (saying who holds it). Raises DeviceBusy, or
        OutputPathError when the claim folder cannot be written (a usage error, not a bug)."""
        try:
            return self._acquire(wait_s, say, cancel)
        except OSError as exc:
            self._lock.release()
            raise OutputPathError(f"{self.device}: cannot claim it in the claim folder {self.lock_dir}: "
                                  f"{exc.strerror or exc}; pass --lock-dir (or set {LOCK_DIR_ENV}) to a folder "
                                  "every run on this lab can write") from None

    def _acquire(self, wait_s: float, say: Callable[[str], None] | None,
                 cancel: threading.Event | None) -> LockHolder:
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + wait_s
        first = True
        while True:
            remaining = deadline - time.monotonic()
            # First a plain try (so the wait is announced before it starts), then short
            # slices so a stop request is noticed while waiting.
            if self._lock.acquire(timeout=0 if first else max(0.0, min(0.5, remaining))):
                break
            holder = read_holder(self.holder_path)
            who = holder.describe() if holder else "another run (no holder record yet)"
            if cancel is not None and cancel.is_set():
                raise DeviceBusy(f"{self.device}: stopped while waiting for the device lock held by {who}")
            if time.monotonic() >= deadline:
                raise DeviceBusy(
                    f"{self.device}: in use by {who}; skipped after waiting {wait_s:.0f} s "
                    f"(lock {self.lock_path}). Wait for that run, or wait longer: {wait_longer(self.purpose)}"
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
        self._lock.release()

    def __enter__(self) -> DeviceLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_states(lock_dir: Path, devices: Iterable[str]) -> dict[str, LockState]:
    """`lock_state` of many devices. The folder is listed once: a device with neither a lock
    file nor a holder record is free without a look at it (a 10 000-device `lab status` spent
    0.6-1.1 s opening files that were not there, outside its deadline)."""
    lock_dir = Path(lock_dir)
    try:
        present: set[str] | None = set(os.listdir(lock_dir))
    except FileNotFoundError:
        present = set()
    except OSError:  # not listable (permissions): ask each device's files as lock_state does
        present = None
    out = {}
    for device in devices:
        lock, holder = _names(device)
        out[device] = (LockState(device, held=False) if present is not None and lock not in present
                       and holder not in present else lock_state(lock_dir, device))
    return out


def lock_state(lock_dir: Path, device: str) -> LockState:
    """Who holds a device now. Probes the lock (a momentary non-blocking take) for the truth."""
    lock_path, holder_path = _paths(Path(lock_dir), device)
    holder = read_holder(holder_path)
    if not lock_path.exists():
        return LockState(device, held=False, holder=holder)
    probe = _Flock(lock_path)
    if not probe.acquire(timeout=0):
        return LockState(device, held=True, holder=read_holder(holder_path) or holder)
    probe.release()
    return LockState(device, held=False, holder=holder)
