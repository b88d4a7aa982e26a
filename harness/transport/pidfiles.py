"""Who a timed command's device process is, and killing only what is proven the harness's own.

A timed `shell()` runs its program in a subshell that writes its own `/proc/self/stat` line to
a pid file in the device's scratch folder and then `exec`s the program (same pid, same start
time); the outer shell removes the file when the program ends (`command.build_shell_command`).
A pid alone proves nothing once its process is gone (the kernel hands the number out again), so
a kill first compares the start time in the file (`/proc/PID/stat` field 22, clock ticks since
boot: a pid and its start time name one process until reboot) with the live one, on the device,
in the same shell that sends the signal. The same check works over adb, ssh and on the host:
it only needs the device's /proc and `sh`.
"""

from __future__ import annotations

from dataclasses import dataclass

PID_PREFIX = "pid-"

# argv: PID:START pairs. Kills each pid whose live start time is START (not a zombie) and prints
# it. `set --` inside the loop does not change its list (expanded once, before the first pass).
PROVEN_KILL_SCRIPT = (
    'for w; do p=${w%:*}; s=${w#*:}; '
    '{ read -r l < "/proc/$p/stat"; } 2>/dev/null || continue; '
    'l=${l##*")"}; set -- $l; '
    '[ "${20}" = "$s" ] && [ "$1" != Z ] && kill -9 "$p" 2>/dev/null && echo "$p"; '
    'done; exit 0'
)


@dataclass(frozen=True, order=True)
class DeviceProcess:
    """One process on a device: its pid and start time (clock ticks since boot)."""

    pid: int
    start: int

    @property
    def arg(self) -> str:
        return f"{self.pid}:{self.start}"


def parse_stat_line(text: str) -> DeviceProcess | None:
    """The process a `/proc/PID/stat` line (as a pid file holds it) names; None when the text
    is not one (an empty or half-written file, a device without /proc)."""
    head, sep, rest = text.strip().partition(" (")
    fields = rest.rsplit(")", 1)[-1].split() if sep else []
    # after the command name: state, ppid, ... starttime is the 20th (field 22 of the line)
    if not head.isdigit() or len(fields) < 20 or not fields[19].isdigit():
        return None
    return DeviceProcess(int(head), int(fields[19]))


def parse_killed(stdout: str) -> list[int]:
    return sorted({int(w) for w in stdout.split() if w.isdigit()})
