"""The narrow seams a consumer of a device link needs, each a Protocol that `Transport` meets:
run a command, move files (one at a time, or a set's in batches), kill processes, read what the
device is; and, for the link's owner, hold it (stop, close). A consumer is typed on the
seam it uses, so its signature says what it does with the device (and a fake for a test needs
only that seam)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Protocol

from harness.inventory import DeviceSpec
from harness.transport.base import ProgressFn
from harness.transport.facts import DeviceFacts
from harness.transport.pidfiles import DeviceProcess
from harness.transport.types import CommandResult, HealthReport, RemoteStat


class OnDevice(Protocol):
    @property
    def device(self) -> DeviceSpec: ...


class RunsCommands(OnDevice, Protocol):
    """Programs and short file-system commands on the device."""

    def shell(self, args: Sequence[str], *, timeout: float | None = None, cwd: str | None = None,
              env: Mapping[str, str] | None = None, check: bool = False) -> CommandResult: ...

    def quick(self, args: Sequence[str], *, timeout: float = 60, check: bool = True) -> CommandResult: ...


class MovesFiles(OnDevice, Protocol):
    """Files to and from the device, and the few questions about them a push asks."""

    def push(self, local: Path, remote: str, *, mode: int | None = None, progress: ProgressFn | None = None) -> int: ...
    def pull(self, remote: str, local: Path, *, progress: ProgressFn | None = None) -> int: ...
    def stat(self, remote: str) -> RemoteStat | None: ...
    def exists(self, remote: str) -> bool: ...
    def read_small_files(self, remotes: Sequence[str], max_bytes: int = 4 << 20) -> dict[str, bytes | None]: ...
    def makedirs(self, *remote_dirs: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def remove(self, *remote: str, recursive: bool = False) -> None: ...
    def free_bytes(self, remote: str) -> int: ...


class MovesManyFiles(MovesFiles, Protocol):
    """Files in batches, as a sync of a whole set moves them: drivers with a pipelined file
    protocol answer each batch in one session (adb)."""

    free_bytes_is_df: ClassVar[bool]  # free_bytes() reads the device's `df` (not the host OS)

    def push_many(self, jobs: Sequence[tuple[Path, str, int]], *, progress: ProgressFn | None = None,
                  on_done: Callable[[str], None] | None = None,
                  on_digest: Callable[[str, str], None] | None = None) -> int: ...
    def stat_many(self, remotes: Sequence[str]) -> dict[str, RemoteStat | None]: ...
    def read_and_stat(self, reads: Sequence[str], stats: Sequence[str], max_bytes: int = 4 << 20
                      ) -> tuple[dict[str, bytes | None], dict[str, RemoteStat | None]]: ...


class KillsProcesses(OnDevice, Protocol):
    """Only processes proven the harness's own (pid and start time)."""

    def is_running(self, pid: int) -> bool: ...
    def kill_proven(self, procs: Iterable[DeviceProcess], wait_s: float = 5.0) -> list[int]: ...
    def kill_stray_processes(self, pids: Iterable[int] = ()) -> list[int]: ...


class ReadsFacts(OnDevice, Protocol):
    """Who the device is and its condition."""

    def facts(self) -> dict[str, str]: ...
    def device_facts(self) -> DeviceFacts: ...
    def health(self) -> HealthReport: ...


class HeldLink(OnDevice, Protocol):
    """What the owner of a link does with it (the lab's worker): tie it to the night's stop and
    close it."""

    def stop_on(self, event: threading.Event | None) -> None: ...
    def close(self) -> None: ...


class RunsAndMovesFiles(RunsCommands, MovesFiles, Protocol):
    """A runner's seam: it places inputs, runs a program and reads its outputs."""


class SyncsSets(RunsCommands, MovesManyFiles, Protocol):
    """Provisioning's sync of a set (harness/provision/sync.py): its device scripts, and the set's
    files in batches."""
