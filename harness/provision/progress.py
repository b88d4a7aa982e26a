"""Push progress: a redrawn bar (bytes, rate, ETA) on a terminal, a few plain lines in CI logs."""

# Not rich.progress (issue 12, measured): it would replace only TerminalProgress (~35 lines
# -> ~25); LogProgress, _Meter and human_bytes stay, since rich prints nothing periodic in
# CI logs. It costs 3 more packages and ~45 ms of import (python -X importtime) on the
# `harness push` start-up path, which we keep fast.

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Protocol, TextIO


class Progress(Protocol):
    def start(self, label: str, total_bytes: int, total_files: int) -> None: ...
    def advance(self, nbytes: int) -> None: ...
    def file_done(self, name: str) -> None: ...
    def finish(self, summary: str) -> None: ...


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class _Meter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.label, self.total, self.files, self.done, self.files_done = "", 0, 0, 0, 0
        self.t0 = clock()

    def reset(self, label: str, total: int, files: int) -> None:
        self.label, self.total, self.files, self.done, self.files_done = label, total, files, 0, 0
        self.t0 = self.clock()

    @property
    def rate(self) -> float:
        dt = self.clock() - self.t0
        return self.done / dt if dt > 0 else 0.0

    def line(self) -> str:
        rate = self.rate
        eta = _eta((self.total - self.done) / rate) if rate > 0 else "--:--"
        return (f"{self.label}: {human_bytes(self.done)}/{human_bytes(self.total)} "
                f"({self.files_done}/{self.files} files) {human_bytes(rate)}/s ETA {eta}")


class NullProgress:
    def start(self, label: str, total_bytes: int, total_files: int) -> None: ...
    def advance(self, nbytes: int) -> None: ...
    def file_done(self, name: str) -> None: ...
    def finish(self, summary: str) -> None: ...


class TerminalProgress:
    """One line redrawn in place at most 10 times a second."""

    def __init__(self, stream: TextIO, width: int = 24, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.width = stream, width
        self.meter = _Meter(clock)
        self._last = 0.0

    def start(self, label: str, total_bytes: int, total_files: int) -> None:
        self.meter.reset(label, total_bytes, total_files)
        self._draw(force=True)

    def advance(self, nbytes: int) -> None:
        self.meter.done += nbytes
        self._draw()

    def file_done(self, name: str) -> None:
        self.meter.files_done += 1
        self._draw()

    def _draw(self, force: bool = False) -> None:
        now = self.meter.clock()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        frac = self.meter.done / self.meter.total if self.meter.total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r[{bar}] {frac * 100:5.1f}% {self.meter.line()}\x1b[K")
        self.stream.flush()

    def finish(self, summary: str) -> None:
        self.stream.write(f"\r{summary}\x1b[K\n")
        self.stream.flush()


class LogProgress:
    """CI logs: a start line, a line every `every_s` seconds while pushing, and a summary."""

    def __init__(self, stream: TextIO, every_s: float = 15.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.every_s = stream, every_s
        self.meter = _Meter(clock)
        self._last = 0.0

    def start(self, label: str, total_bytes: int, total_files: int) -> None:
        self.meter.reset(label, total_bytes, total_files)
        self._last = self.meter.clock()
        self.stream.write(f"{label}: pushing {total_files} files, {human_bytes(total_bytes)}\n")
        self.stream.flush()

    def advance(self, nbytes: int) -> None:
        self.meter.done += nbytes
        now = self.meter.clock()
        if now - self._last >= self.every_s:
            self._last = now
            self.stream.write(self.meter.line() + "\n")
            self.stream.flush()

    def file_done(self, name: str) -> None:
        self.meter.files_done += 1

    def finish(self, summary: str) -> None:
        self.stream.write(summary + "\n")
        self.stream.flush()


def is_ci(env: Mapping[str, str]) -> bool:
    value = env.get("CI", "").strip().lower()
    return value not in ("", "0", "false", "no")


def make_progress(stream: TextIO | None = None, env: Mapping[str, str] | None = None) -> Progress:
    """Bar on an interactive terminal, quiet lines when not a tty or when CI is set."""
    stream = stream if stream is not None else sys.stderr
    env = env if env is not None else os.environ
    isatty = getattr(stream, "isatty", lambda: False)()
    if isatty and not is_ci(env):
        return TerminalProgress(stream)
    return LogProgress(stream)


__all__ = ["LogProgress", "NullProgress", "Progress", "TerminalProgress", "human_bytes", "is_ci", "make_progress"]
