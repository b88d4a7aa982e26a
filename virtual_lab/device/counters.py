"""The device's own counters (`DeviceCounters`): what adbd served, as `vlabstat` prints them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields


@dataclass
class DeviceCounters:
    """The device's own view of what it served (tests compare the harness against these)."""

    send_bytes: int = 0        # file bytes written by sync SEND
    send_files: int = 0        # SENDs completed with OKAY
    send_failures: int = 0     # SENDs answered FAIL or cut off
    recv_bytes: int = 0        # file bytes sent by sync RECV
    recv_files: int = 0
    connections: int = 0       # transport connections accepted (CNXN answered or refused)
    connections_aborted: int = 0
    service_opens: dict[str, int] = field(default_factory=dict)   # shell, shell_v2, exec, sync, refused
    sync_requests: dict[str, int] = field(default_factory=dict)   # STAT, STA2, LIST, SEND, RECV...
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **deltas: int) -> None:
        with self._lock:
            for key, n in deltas.items():
                setattr(self, key, getattr(self, key) + n)

    def bump(self, table: str, key: str) -> None:
        with self._lock:
            d = getattr(self, table)
            d[key] = d.get(key, 0) + 1

    def snapshot(self) -> dict:
        with self._lock:
            data = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
            data["service_opens"] = dict(self.service_opens)
            data["sync_requests"] = dict(self.sync_requests)
        return data
