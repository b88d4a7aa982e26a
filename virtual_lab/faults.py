"""Fault injection for one virtual device, switchable at runtime from tests.

`FaultPlan` is the in-process API (thread-safe). The device reacts to changes through
listeners (e.g. `offline_for` aborts live connections at once). A device that runs in
another process is steered through a JSON control file: `FaultControlFile(path).update(...)`
writes it, the device polls it (`FaultPlan.watch_file`) and applies it to its own plan.

Faults
- `drop_after_bytes(n, scope="send"|"any", keep_partial=True)`: one-shot. After n more payload
  bytes (of sync SEND file data, or of any WRTE payload in either direction) the TCP
  connection is closed abruptly. With scope "send" exactly n bytes reach the file first.
  keep_partial=True plays an adbd that died mid-write (the partial file stays); False plays
  adbd's own clean-up on a lost peer (it unlinks the file).
- `offline_for(seconds)`: live connections are aborted and new ones are accepted-and-reset
  until the time has passed. Observed with Debian adb 29: the server lists the device
  `offline` and retries by itself about once a second (for about a minute), so it often comes
  back alone shortly after the window; an `adb connect` during the window blocks ~10 s and
  prints "failed to connect", one after it prints "already connected" while still offline.
  Deterministic recovery: `adb disconnect HOST:PORT` + `adb connect HOST:PORT` after the window.
  A cut link (drop fault, restart) is likewise re-attached by the server within ~0.3 s.
- `unauthorized(on=True)`: new handshakes get AUTH(TOKEN) and never a CNXN, so the server
  lists the device `unauthorized` (after the next connect). Live connections are left alone.
  `unauthorized(False)` plays the user tapping "Allow": waiting handshakes get their CNXN.
- `disk_full()` / `set_free_bytes(n)`: from now on only n more bytes fit on /data; a SEND
  beyond that fails with `write failed: No space left on device`, `df` reports it too.
- `slow_link(bytes_per_s)`: WRTE payloads in both directions pass a token bucket
  (`Throttle`, whose counters tests can assert on).
- `stderr_after_stdout(on=True)`: v1 `shell:`/`exec:` hold the command's stderr back and send
  it after its stdout has ended, as some adbd builds do (seen on an independently written
  adbd): stderr then arrives after everything the command printed to stdout.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

DROP_SCOPES = ("send", "any")


class FaultError(ValueError):
    """Bad fault settings (a clear message, never a traceback for the user)."""


@dataclass(frozen=True)
class FaultSettings:
    """A JSON-able snapshot of every fault switch (the control file's content)."""

    drop_after_bytes: int | None = None
    drop_scope: str = "send"
    drop_keep_partial: bool = True
    offline_until: float | None = None  # wall clock (time.time()), so another process can set it
    unauthorized: bool = False
    free_bytes: int | None = None
    slow_bytes_per_s: float | None = None
    stderr_after_stdout: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, source: str = "fault settings") -> FaultSettings:
        if not isinstance(data, dict):
            raise FaultError(f"{source}: expected a JSON object, got {type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise FaultError(f"{source}: unknown key(s) {unknown}; known keys: {sorted(known)}")
        settings = cls(**data)
        settings.validate(source)
        return settings

    def validate(self, source: str = "fault settings") -> None:
        for key in ("drop_after_bytes", "free_bytes"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise FaultError(f"{source}: {key} must be a non-negative integer or null, got {value!r}")
        if self.drop_scope not in DROP_SCOPES:
            raise FaultError(f"{source}: drop_scope must be one of {DROP_SCOPES}, got {self.drop_scope!r}")
        rate = self.slow_bytes_per_s
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0):
            raise FaultError(f"{source}: slow_bytes_per_s must be a positive number or null, got {rate!r}")
        if not isinstance(self.stderr_after_stdout, bool):
            raise FaultError(f"{source}: stderr_after_stdout must be true or false, got {self.stderr_after_stdout!r}")
        until = self.offline_until
        if until is not None and (isinstance(until, bool) or not isinstance(until, (int, float))):
            raise FaultError(f"{source}: offline_until must be an epoch time or null, got {until!r}")


@dataclass
class FaultCounters:
    drops_fired: int = 0
    offline_refusals: int = 0
    auth_refusals: int = 0


class DropDecision(NamedTuple):
    allowed: int        # bytes that may still pass
    fire: bool          # abort the connection now
    keep_partial: bool  # leave a partially sent file in place (adbd "died")


Listener = Callable[[FaultSettings, FaultSettings], None]  # (old, new)


class FaultPlan:
    """Per-device fault switches. Every method is safe to call from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._settings = FaultSettings()
        self._drop_budget: int | None = None  # bytes left before the armed drop fires
        self._listeners: list[Listener] = []
        self.counters = FaultCounters()
        self._watch_stop: threading.Event | None = None

    # ---- switches ---------------------------------------------------------------------
    def drop_after_bytes(self, n: int, *, scope: str = "send", keep_partial: bool = True) -> None:
        self._set(drop_after_bytes=n, drop_scope=scope, drop_keep_partial=keep_partial)

    def offline_for(self, seconds: float) -> None:
        if seconds <= 0:
            raise FaultError(f"offline_for: seconds must be positive, got {seconds!r}")
        self._set(offline_until=time.time() + float(seconds))

    def unauthorized(self, on: bool = True) -> None:
        self._set(unauthorized=bool(on))

    def disk_full(self) -> None:
        self._set(free_bytes=0)

    def set_free_bytes(self, n: int | None) -> None:
        self._set(free_bytes=n)

    def slow_link(self, bytes_per_s: float | None) -> None:
        self._set(slow_bytes_per_s=bytes_per_s)

    def stderr_after_stdout(self, on: bool = True) -> None:
        self._set(stderr_after_stdout=bool(on))

    def clear(self) -> None:
        """Switch every fault off."""
        self.apply(FaultSettings())

    def apply(self, settings: FaultSettings) -> None:
        """Replace all switches at once (what the control-file watcher does)."""
        settings.validate()
        self._replace(settings)

    # ---- queries used by the device -----------------------------------------------------
    @property
    def settings(self) -> FaultSettings:
        with self._lock:
            return self._settings

    def is_offline(self) -> bool:
        until = self.settings.offline_until
        return until is not None and time.time() < until

    def offline_remaining(self) -> float:
        until = self.settings.offline_until
        return max(0.0, until - time.time()) if until is not None else 0.0

    def take_drop_budget(self, nbytes: int, scope: str) -> DropDecision:
        """Account nbytes of traffic of `scope` ("send" file data or "any" WRTE payload).

        The drop is one-shot: once it fires it disarms, so a reconnect works.
        """
        with self._lock:
            s = self._settings
            if self._drop_budget is None or (s.drop_scope != "any" and s.drop_scope != scope):
                return DropDecision(nbytes, False, True)
            if nbytes < self._drop_budget:
                self._drop_budget -= nbytes
                return DropDecision(nbytes, False, True)
            allowed = self._drop_budget
            self._drop_budget = None
            self._settings = replace(s, drop_after_bytes=None)
            self.counters.drops_fired += 1
            return DropDecision(allowed, True, s.drop_keep_partial)

    def note_offline_refusal(self) -> None:
        with self._lock:
            self.counters.offline_refusals += 1

    def note_auth_refusal(self) -> None:
        with self._lock:
            self.counters.auth_refusals += 1

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    # ---- control file (for a device in another process) ------------------------------
    def watch_file(self, path: Path, interval_s: float = 0.1) -> None:
        """Poll `path` (a FaultControlFile) and apply it whenever it changes."""
        self.stop_watching()
        stop = threading.Event()
        self._watch_stop = stop
        thread = threading.Thread(target=self._watch, args=(Path(path), interval_s, stop),
                                  name=f"faults-watch-{Path(path).name}", daemon=True)
        thread.start()

    def stop_watching(self) -> None:
        if self._watch_stop is not None:
            self._watch_stop.set()
            self._watch_stop = None

    def _watch(self, path: Path, interval_s: float, stop: threading.Event) -> None:
        def key_of() -> tuple[int, int, int] | None:
            try:
                st = path.stat()
            except FileNotFoundError:
                return None
            return (st.st_ino, st.st_mtime_ns, st.st_size)  # atomic replace => new inode

        seen = key_of()  # only changes made after watching starts are applied
        while not stop.wait(interval_s):
            key = key_of()
            if key is None or key == seen:
                continue
            seen = key
            try:
                settings = FaultControlFile(path).read()
            except (FaultError, OSError, json.JSONDecodeError):
                continue  # a half-written or bad file: keep the current plan, retry on change
            self._replace(settings)

    # ---- internals ----------------------------------------------------------------------
    def _set(self, **changes: Any) -> None:
        with self._lock:
            new = replace(self._settings, **changes)
        new.validate()
        self._replace(new)

    def _replace(self, new: FaultSettings) -> None:
        with self._lock:
            old = self._settings
            self._settings = new
            if new.drop_after_bytes != old.drop_after_bytes or new.drop_scope != old.drop_scope:
                self._drop_budget = new.drop_after_bytes
            listeners = list(self._listeners)
        for listener in listeners:
            listener(old, new)


class FaultControlFile:
    """The JSON control file through which another process steers a device's faults."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> FaultSettings:
        if not self.path.exists():
            return FaultSettings()
        return FaultSettings.from_dict(json.loads(self.path.read_text()), source=str(self.path))

    def write(self, settings: FaultSettings) -> None:
        settings.validate(str(self.path))
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(settings.to_dict(), indent=1))
        os.replace(tmp, self.path)  # atomic: the watcher never sees half a file

    def update(self, **changes: Any) -> FaultSettings:
        """Change some switches, e.g. update(free_bytes=0) or update(offline_until=time.time()+5)."""
        settings = replace(self.read(), **changes)
        self.write(settings)
        return settings

    def clear(self) -> None:
        self.write(FaultSettings())


@dataclass
class Throttle:
    """Token bucket for the slow-link fault; `rate_fn` gives the current bytes/s (None = off)."""

    rate_fn: Callable[[], float | None]
    bytes_throttled: int = 0
    slept_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _next_free: float = 0.0  # monotonic time at which the link is free again

    def consume(self, nbytes: int) -> None:
        rate = self.rate_fn()
        if not rate or nbytes <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_free)
            self._next_free = start + nbytes / rate
            wait = self._next_free - now
            self.bytes_throttled += nbytes
            self.slept_s += max(0.0, wait)
        if wait > 0:
            time.sleep(wait)

    def snapshot(self) -> dict:
        with self._lock:
            return {"bytes_throttled": self.bytes_throttled, "slept_s": round(self.slept_s, 6)}
