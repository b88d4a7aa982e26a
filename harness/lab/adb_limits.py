"""Will a local adb server have descriptors for tonight? (docs/lab-scale.md)

An adb server keeps the open-file limit it was started with (Debian's adb 29 raises nothing) and
spends one descriptor per `adb connect`ed TCP device besides one per client connection; full,
it accepts connections and never answers them. Before a night, for each adb server on this host
that serves the night's TCP devices, its limit is read from /proc and compared with what the
night needs: one per TCP device, one per worker (two at a stop), and the server's own ~10.
Linux only, and only servers on this host: elsewhere nothing is said.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from harness.inventory import ADB, DEFAULT_ADB_SERVER_PORT, DeviceSpec
from harness.transport import is_tcp_serial

_SERVER_OWN = 10  # the descriptors an idle adb server holds itself (measured: 74 with 64 devices)


def _listening_inode(port: int) -> str | None:
    """The socket inode listening on 127.0.0.1/any `port` (/proc/net/tcp, state 0A)."""
    want = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[1].endswith(want) and f[3] == "0A":
                return f[9]
    return None


def _owner(inode: str) -> int | None:
    """The pid holding socket `inode` (the first found; ours to read as the same user or root)."""
    target = f"socket:[{inode}]"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return int(pid)
            except OSError:
                continue
    return None


def _soft_nofile(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                value = line.split()[3]
                return None if value == "unlimited" else int(value)
    except (OSError, ValueError, IndexError):
        return None
    return None


def adb_server_warnings(devices: list[DeviceSpec], workers: int) -> list[str]:
    """One line per local adb server whose open-file limit the night would exhaust."""
    tcp_per_port: Counter[int] = Counter()
    for d in devices:
        if d.transport is not ADB or not d.serial or not is_tcp_serial(d.serial):
            continue
        server = d.adb_server
        if server is not None and server.host not in ("127.0.0.1", "localhost", "::1"):
            continue
        tcp_per_port[server.port if server is not None else DEFAULT_ADB_SERVER_PORT] += 1
    out = []
    for port, tcp in sorted(tcp_per_port.items()):
        inode = _listening_inode(port)
        pid = _owner(inode) if inode else None
        limit = _soft_nofile(pid) if pid else None
        need = tcp + 2 * min(workers, tcp) + _SERVER_OWN
        if limit is not None and limit < need:
            out.append(f"adb server on port {port} (pid {pid}) may stop answering tonight: its open-file limit is "
                       f"{limit}, and {tcp} TCP devices plus {min(workers, tcp)} workers need about {need}; restart it "
                       f"with a higher limit (`adb -P {port} kill-server; ulimit -n 8192; adb -P {port} start-server`, "
                       "or LimitNOFILE= in its service) or lower `concurrency.workers`")
    return out
