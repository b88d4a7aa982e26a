"""The parent of one export command, so that nothing it starts outlives it.

An export runs in a process group of its own (process.py), but a descendant that calls
`setsid()` (a daemonising helper, a compiler server) leaves the group and a group kill misses
it. So the stage runs `python -I reaper.py GRACE -- ARGV...`: this process makes itself a child
subreaper (Linux prctl PR_SET_CHILD_SUBREAPER), so every orphan of the command is reparented to
it rather than to init, starts the command, and when the command ends, or a SIGTERM / SIGINT /
SIGHUP comes, ends every descendant it has (found by walking /proc's parent links from its own
pid: nothing else can be reparented to a subreaper, so each one is provably the export's), SIGTERM
first and SIGKILL after GRACE seconds. It then ends as the command ended (its exit code, or the
same signal), so the stage classifies the command and not this wrapper.

Only the standard library: it runs isolated (-I) on the harness's interpreter, whatever the
export's environment says.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_POLL_S = 0.02
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:  # pre-3.4 kernels: the group kill alone
        print(f"harness reaper: no child subreaper ({os.strerror(ctypes.get_errno())})", file=sys.stderr)


def descendants(root: int) -> list[int]:
    """Every live (not zombie) process below `root`, by /proc's parent links."""
    children: dict[int, list[tuple[int, bool]]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append((int(entry.name), fields[0] == "Z"))
    found, stack = [], [root]
    while stack:
        for pid, zombie in children.get(stack.pop(), []):
            if not zombie:
                found.append(pid)
            stack.append(pid)
    return found


def _reap() -> dict[int, int]:
    """Reap every child that has ended: pid -> wait status."""
    ended: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended[pid] = status


def _signal_all(sig: int) -> list[int]:
    pids = descendants(os.getpid())
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return pids


def _end_descendants(grace_s: float) -> dict[int, int]:
    """SIGTERM every descendant, SIGKILL what is left after `grace_s`, reap them all; returns
    the wait statuses reaped."""
    ended: dict[int, int] = {}
    if _signal_all(signal.SIGTERM):
        deadline = time.monotonic() + grace_s
        while descendants(os.getpid()) and time.monotonic() < deadline:
            ended.update(_reap())
            time.sleep(_POLL_S)
    while _signal_all(signal.SIGKILL):
        ended.update(_reap())
        time.sleep(_POLL_S)
    ended.update(_reap())
    return ended


def _end_as(status: int) -> None:
    """Exit as the command did: its code, or killed by its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:  # SIGKILL's action cannot be set (and is always to end)
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)  # a signal that does not end a process by default: fall through
        sys.exit(128 + sig)
    sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    grace_s, command = float(argv[0]), argv[2:]
    stop: list[int] = []
    for sig in _STOP_SIGNALS:
        signal.signal(sig, lambda signum, _frame: stop.append(signum))
    _become_subreaper()
    try:
        child = os.posix_spawnp(command[0], command, os.environ)
    except OSError as exc:
        print(f"harness: cannot start {command[0]!r}: {exc}", file=sys.stderr, flush=True)
        sys.exit(127)
    status = None
    while status is None and not stop:
        status = _reap().get(child)
        if status is None:
            time.sleep(_POLL_S)
    ended = _end_descendants(grace_s)
    if status is None:  # stopped from outside: the command's end is reported as that signal
        status = ended.get(child, stop[0])  # a bare signal number is a "killed by" wait status
    _end_as(status)


if __name__ == "__main__":
    main(sys.argv[1:])
