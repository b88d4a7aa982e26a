"""A transport's stop: the event a caller hands a link (`Transport.stop_on`, the lab's worker
hands it the night's stop) so that device work ends within moments of Ctrl-C or SIGTERM, by
the link itself whatever the caller is doing. A timed command (a program run) is not started
once the stop is set (StopRequested) and is killed on the device when the stop comes while it
runs (it then ends as any killed program, 128+9); a push stops at its next chunk
(StopRequested). Short file commands (`quick`, the sync engine's scripts) run on: a half-done
rename is worse than a second's wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Protocol

from harness.errors import StopRequested
from harness.inventory import DeviceSpec
from harness.transport.command import quote_argv
from harness.transport.pidfiles import DeviceProcess, parse_stat_line

_POLL_S = 0.1
ProgressFn = Callable[[int], None]


class Transport(Protocol):
    """What a stop needs of a link (base.Transport, which imports this module)."""

    device: DeviceSpec
    stop_event: threading.Event | None

    def _exec(self, command: str, timeout: float | None) -> Any: ...

    def kill_proven(self, procs: Iterable[DeviceProcess], wait_s: float = 5.0) -> list[int]: ...


def check_stop(transport: Transport, what: str) -> None:
    stop = transport.stop_event
    if stop is not None and stop.is_set():
        raise StopRequested(f"{transport.device.name}: stopped before {what} (stop requested)", device=transport.device.name)


def stoppable(transport: Transport, progress: ProgressFn | None, what: str) -> ProgressFn | None:
    """`progress` that first raises StopRequested once the transport's stop is set: a push
    stops between chunks (the file stays under its temporary name)."""
    stop = transport.stop_event
    if stop is None:
        return progress

    def advance(n: int) -> None:
        if stop.is_set():
            raise StopRequested(f"{transport.device.name}: {what} stopped between chunks (stop requested)", device=transport.device.name)
        if progress is not None:
            progress(n)

    return advance


class CommandWatch:
    """While one timed command runs: when the transport's stop is set, kill its program on the
    device (found through the command's own pid file, proven ours) so the caller returns."""

    def __init__(self, transport: Transport, pid_file: str | None):
        self.t, self.pid_file = transport, pid_file
        self.stop = transport.stop_event if pid_file else None
        self.done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> CommandWatch:
        if self.stop is not None:
            self._thread = threading.Thread(target=self._watch, daemon=True,
                                            name=f"stop-watch-{self.t.device.name}")
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.done.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        assert self.stop is not None and self.pid_file is not None
        while not self.stop.is_set():  # waits on `done`, so the command's return is not delayed
            if self.done.wait(_POLL_S):
                return
        # The program may not have written its pid file yet (just starting): look until it
        # has, or until the command is over.
        while not self.done.is_set():
            try:
                raw = self.t._exec(f"{quote_argv(['cat', self.pid_file])} 2>/dev/null", 30)
                proc = parse_stat_line(raw.stdout.decode(errors="replace"))
                if proc is not None:
                    self.t.kill_proven([proc])
                    return
            except Exception:  # noqa: BLE001 - a dead link: the command's own call reports it
                return
            time.sleep(_POLL_S / 2)
