"""A few `adb connect`s at a time per adb server, and restarting a local server that died.

Debian's adb 29.0.6 aborts (`fdevent_epoll.cpp:88] failed to unregister fd -1 with epoll: Bad
file descriptor`) when ~100 `host:connect`s to TCP devices that accept and then fail run at
once; every device on it is gone with it (docs/lab-scale.md, benchmarks/adb_connect_burst.py).
So connects and disconnects to one server take one of `CONNECT_SLOTS` slots: lock files
(flock) per server address, shared by every thread and harness process of this user on this
host (a night, `lab status` and a push beside it), released by the kernel if a process dies.
Other servers have slots of their own: a slow server never holds up another's devices.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.errors import DeviceOfflineError

CONNECT_SLOTS = 8  # 128 at once killed the server; 8 at a time held (benchmarks/adb_connect_burst.py)
SLOT_WAIT_S = 120.0  # a connect to a device that accepts and then fails takes the server 10 s
_POLL_S = 0.02


def _gate_dir() -> Path | None:
    folder = Path(tempfile.gettempdir()) / f"harness-adb-gates-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None  # an unwritable temp folder: connect without the gate rather than not at all
    return folder


def _slot_paths(host: str, port: int, slots: int, kind: str) -> list[Path]:
    folder = _gate_dir()
    if folder is None:
        return []
    safe = re.sub(r"[^0-9A-Za-z._-]", "_", host)
    return [folder / f"{safe}-{port}.{kind}{i}.lock" for i in range(slots)]


def _try_lock(path: Path) -> int | None:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@contextmanager
def connect_slot(host: str, port: int, *, device: str, slots: int | None = None,
                 wait_s: float = SLOT_WAIT_S, kind: str = "connect") -> Iterator[None]:
    """Hold one of the server's `kind` slots (CONNECT_SLOTS unless given) while the body runs."""
    slots = CONNECT_SLOTS if slots is None else slots
    paths = _slot_paths(host, port, slots, kind)
    if not paths:
        yield
        return
    deadline = time.monotonic() + wait_s
    fd: int | None = None
    while fd is None:
        for path in paths:
            fd = _try_lock(path)
            if fd is not None:
                break
        else:
            if time.monotonic() >= deadline:
                raise DeviceOfflineError(
                    f"{device}: waited {wait_s:.0f} s for one of the {slots} {kind} slots of adb server "
                    f"{host}:{port} (other devices' `adb connect`s held them all); the server answers connects "
                    "slowly: check its devices", device=device)
            time.sleep(_POLL_S)
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases its flock


def _answers(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError:
        return False
    return True


def restart_server(adb_binary: str, host: str, port: int, *, device: str) -> str | None:
    """Start the local adb server on `port` again after it died (its port refuses connections):
    nothing to kill, since no process listens there. One at a time per server (a slot of its
    own: the caller may hold a connect slot); a server another worker or process started again
    meanwhile is left as it is. What was done, as a sentence for the log; None when another
    had done it. Raises DeviceOfflineError when the server would not start."""
    with connect_slot(host, port, device=device, slots=1, wait_s=60, kind="restart"):
        if _answers(host, port):
            return None
        try:
            subprocess.run([adb_binary, "-P", str(port), "start-server"], timeout=30,
                           stdin=subprocess.DEVNULL, capture_output=True, check=True)
        except subprocess.CalledProcessError as exc:
            failed = (exc.stderr or b"").decode("utf-8", "replace").strip() or f"exit {exc.returncode}"
        except (OSError, subprocess.SubprocessError) as exc:
            failed = f"{type(exc).__name__}: {exc}"
        else:
            return (f"the adb server {host}:{port} had stopped (its port refused connections; Debian's adb 29 "
                    f"aborts under bursts of failing connects, see its log /tmp/adb.<uid>.log): started it "
                    f"again with `adb -P {port} start-server`; its TCP devices are connected again on use")
    raise DeviceOfflineError(f"{device}: the adb server {host}:{port} stopped and `adb -P {port} start-server` "
                             f"failed: {failed}", device=device)


__all__ = ["CONNECT_SLOTS", "connect_slot", "restart_server"]
