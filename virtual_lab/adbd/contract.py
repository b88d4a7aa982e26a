"""What adbd needs from the device it serves, and nothing more.

adbd plays a daemon on an Android device; this is its view of the device, as a real adbd's
is the kernel's: the CNXN banner, the fault plan and link throttle, counters, a shell, the
file tree for sync, and the partition's free space. `virtual_lab.device.VirtualDevice`
satisfies it; adbd never imports the device (no import circle).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from virtual_lab.faults import FaultPlan, Throttle


class Counters(Protocol):
    """The device's own counters (`vlabstat`): plain totals and per-name tables."""

    def add(self, **deltas: int) -> None: ...

    def bump(self, table: str, key: str) -> None: ...


class ResolvedPath(Protocol):
    """A device path after symlinks were followed inside the sandbox."""

    @property
    def device(self) -> str: ...

    @property
    def host(self) -> Path | None: ...  # None: nothing of the sandbox is there

    @property
    def writable(self) -> bool: ...

    @property
    def is_root(self) -> bool: ...  # "/": a virtual folder listing the mounts


class Tree(Protocol):
    """The device's Android file tree and its shell."""

    @property
    def root(self) -> Path: ...

    def resolve(self, path: str, follow_last: bool = ...) -> ResolvedPath: ...

    def root_entries(self) -> list[str]: ...

    def popen(self, command: str, *, merge_stderr: bool) -> subprocess.Popen: ...


class Disk(Protocol):
    """The /data partition as a SEND sees it (capacity and the disk-full fault)."""

    def free_bytes(self) -> int: ...

    def note_written(self, nbytes: int) -> None: ...


class AdbdDevice(Protocol):
    """The device behind one adbd server."""

    @property
    def name(self) -> str: ...  # for thread names and error messages

    @property
    def faults(self) -> FaultPlan: ...

    @property
    def throttle(self) -> Throttle: ...

    @property
    def counters(self) -> Counters: ...

    @property
    def sandbox(self) -> Tree: ...

    @property
    def disk(self) -> Disk: ...

    def banner(self, features: Sequence[str]) -> str: ...

    def flush_counters(self) -> None:
        """Write the counters where other processes read them (after each service, refusal)."""
        ...
