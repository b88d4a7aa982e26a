"""The device log as a service with a start/stop lifecycle (as Mobly's logcat service).

`start()` before a process, `stop()` after it returns the log lines of that run: the slice a
runner classifies crashes and (logcat-only builds) summaries from. Devices without a
`logcat` command (Linux boards over ssh, the host) have no slice: `stop()` returns None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.transport.seams import RunsCommands

MODES = ("clear", "since", "off")
# Crash reports come with every slice, whatever tags the caller asked for.
CRASH_TAGS = ("DEBUG", "libc")
_THREADTIME_START = re.compile(r"\d\d-\d\d ")


@dataclass
class LogcatService:
    """mode: "clear" (`logcat -c` at start, `-d` at stop), "since" (keep the buffer, take
    the lines stamped at or after start; second resolution) or "off". `tags`: the log tags
    of the slice (all priorities), besides CRASH_TAGS."""

    transport: RunsCommands
    mode: str = "clear"
    tags: tuple[str, ...] = ()
    _available: bool | None = field(default=None, init=False, repr=False)
    _since: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise HarnessError(f"logcat mode {self.mode!r} is not one of {', '.join(MODES)}")

    def available(self) -> bool:
        """Whether the device has a logcat (asked once per service)."""
        if self._available is None:
            res = self.transport.shell(["logcat", "-d", "-t", "1"], timeout=30)
            self._available = res.exit_code == 0
        return self._available

    def _on(self) -> bool:
        return self.mode != "off" and self.available()

    def start(self) -> None:
        """Mark the start of a slice (before the process runs)."""
        self._since = None
        if not self._on():
            return
        if self.mode == "clear":
            self.transport.shell(["logcat", "-c"], timeout=30)
        else:
            self._since = self.transport.shell(["date", "+%m-%d %H:%M:%S"], timeout=30).stdout.strip()

    def stop(self) -> str | None:
        """The slice since start() in threadtime format; None without a device logcat."""
        if not self._on():
            return None
        specs = [f"{t}:V" for t in (*self.tags, *CRASH_TAGS)]
        text = self.transport.shell(["logcat", "-d", "-v", "threadtime", "-s", *specs], timeout=60).stdout
        since, self._since = self._since, None
        if since:
            # threadtime lines start with "MM-DD HH:MM:SS.mmm": string order is time order.
            text = "".join(line for line in text.splitlines(keepends=True)
                           if line[:14] >= since or not _THREADTIME_START.match(line))
        return text


__all__ = ["CRASH_TAGS", "MODES", "LogcatService"]
