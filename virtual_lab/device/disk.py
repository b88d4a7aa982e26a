"""The virtual /data partition (`DiskModel`): capacity, used bytes, and the disk-full fault."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

from virtual_lab.device.sandbox import Sandbox, atomic_write


class DiskModel:
    """The virtual /data partition: capacity from the spec, used = bytes under data/ and sdcard/.

    `set_free_bytes(n)` (a fault) caps what fits from then on: free = n - growth since.
    """

    CACHE_S = 1.0

    def __init__(self, sandbox: Sandbox, capacity: int) -> None:
        self.sandbox = sandbox
        self.capacity = capacity
        self._lock = threading.Lock()
        self._cache: tuple[float, int] | None = None
        self._limit: int | None = None
        self._baseline = 0

    def used_bytes(self, fresh: bool = False) -> int:
        with self._lock:
            if not fresh and self._cache and time.monotonic() - self._cache[0] < self.CACHE_S:
                return self._cache[1]
        used = 0
        for sub in ("data", "sdcard"):
            top = self.sandbox.root / sub
            used += _apparent_size(top)
        with self._lock:
            self._cache = (time.monotonic(), used)
        return used

    def note_written(self, nbytes: int) -> None:
        with self._lock:
            if self._cache:
                self._cache = (self._cache[0], self._cache[1] + nbytes)

    def free_bytes(self) -> int:
        used = self.used_bytes()
        free = self.capacity - used
        with self._lock:
            if self._limit is not None:
                free = min(free, self._limit - max(0, used - self._baseline))
        return max(0, free)

    def set_limit(self, free_bytes: int | None) -> None:
        baseline = self.used_bytes(fresh=True)
        with self._lock:
            self._limit, self._baseline = free_bytes, baseline
        self.write_state()

    def write_state(self) -> None:
        with self._lock:
            limit = "" if self._limit is None else str(self._limit)
            text = f"capacity={self.capacity}\nlimit={limit}\nbaseline={self._baseline}\n"
        atomic_write(self.sandbox.state_dir / "disk.prop", text)


def _apparent_size(top: Path) -> int:
    """Bytes as `du -sb` counts them (files and directories, hard links once)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(top)]
    try:
        total += os.lstat(top).st_size
    except OSError:
        return 0
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_size
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
    return total
