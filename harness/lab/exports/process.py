"""One export command as a process group of its own, on the lab host.

The command starts in a new session (its own process group, pgid = its pid), with its output in a
log file. It ends one of three ways: it exits; its timeout passes; the night's stop is set
(Ctrl-C, SIGTERM). In the last two the whole group gets SIGTERM, then SIGKILL after a grace, so
an exporter's own workers (a lowering's compiler threads are processes too) go with it. The
group is signalled only while its leader is unreaped (a zombie at worst, found with
waitid(WNOWAIT)): its pid, and so the group's id, cannot name another process then, which is
what makes the group provably ours. Leftovers of a leader that exited on its own are killed the
same way before it is reaped. The leader is reaper.py, the command's parent: descendants that
left the group with setsid() are its to end.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_POLL_S = 0.02
REAPER = Path(__file__).with_name("reaper.py")  # the command's parent: its setsid() descendants end too
TERM_GRACE_S = 0.5  # SIGTERM first: an exporter may clean up; then SIGKILL (a stop ends within 2 s)


@dataclass(frozen=True)
class ProcessEnd:
    returncode: int | None  # None: it never started (`start_error`)
    duration_s: float
    timed_out: bool = False
    stopped: bool = False  # ended by the night's stop
    start_error: OSError | None = None


def _exited(pid: int) -> bool:
    """The leader has exited (a zombie now), without reaping it."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """Any live process of the group left (its reaped leader's children, reparented). Zombies do
    not count: they run nothing, and who reaps them (the host's init) is not ours to wait for."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _end_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the group, SIGKILL it after `grace_s` (or at once when the leader is gone), reap the
    leader, then wait briefly until no member is left."""
    _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and not _exited(proc.pid):
        time.sleep(_POLL_S)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    _wait_group_gone(proc.pid, 1.0)


def _wait_group_gone(pgid: int, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(_POLL_S)


def run_group(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path, timeout_s: float,
              stop: threading.Event, grace_s: float = TERM_GRACE_S) -> ProcessEnd:
    """Run `argv` in its own process group, stdout and stderr into `log_path`, until it exits,
    `timeout_s` passes or `stop` is set; nothing of the group is left running when this returns."""
    started = time.monotonic()
    if shutil.which(argv[0], path=env.get("PATH", os.defpath) if os.sep not in argv[0] else None) is None:
        # found here, as Popen would have: the reaper below would only see it fail inside
        why = "No such file or directory" if not os.path.exists(cwd / argv[0]) else "Permission denied"
        exc = OSError(errno.ENOENT if why.startswith("No") else errno.EACCES, why, argv[0])
        with open(log_path, "ab") as log:
            log.write(f"harness: cannot start {argv[0]!r}: {exc}\n".encode())
        return ProcessEnd(None, time.monotonic() - started, start_error=exc)
    # The reaper gives its descendants most of the grace; the group's SIGKILL after it is the backstop.
    wrapped = [sys.executable, "-I", str(REAPER), f"{grace_s * 0.6:g}", "--", *argv]
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(wrapped, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        except OSError as exc:
            log.write(f"harness: cannot start {argv[0]!r}: {exc}\n".encode())
            return ProcessEnd(None, time.monotonic() - started, start_error=exc)
    deadline = started + timeout_s
    timed_out = stopped = False
    while not _exited(proc.pid):
        if stop.is_set():
            stopped = True
            break
        if time.monotonic() > deadline:
            timed_out = True
            break
        time.sleep(_POLL_S)
    if stopped or timed_out:
        _end_group(proc, grace_s)
    else:
        # The leader is done but not reaped: whatever it left in its group is still provably ours.
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        _wait_group_gone(proc.pid, 1.0)
    return ProcessEnd(proc.returncode, time.monotonic() - started, timed_out=timed_out, stopped=stopped)
