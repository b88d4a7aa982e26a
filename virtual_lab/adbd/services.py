"""Which service an OPEN asks for: `shell:`, `shell,v2,...:`, `exec:`, `sync:`. Anything else
is refused (the connection answers CLSE)."""

from __future__ import annotations

from collections.abc import Callable

from virtual_lab.adbd.contract import AdbdDevice
from virtual_lab.adbd.shell import serve_shell
from virtual_lab.adbd.stream import Stream
from virtual_lab.adbd.sync import serve_sync

ServiceFn = Callable[[AdbdDevice, Stream], None]


def route(service: str) -> tuple[str, ServiceFn] | None:
    """(counter name, what serves it), or None for a service adbd refuses."""
    if service.startswith("shell"):
        head, sep, command = service.partition(":")
        if not sep:
            return None
        args = head.split(",")[1:] if head.startswith("shell,") else ([] if head == "shell" else None)
        if args is None:
            return None
        v2 = "v2" in args
        return ("shell_v2" if v2 else "shell"), (lambda d, s: serve_shell(d, s, command, v2))
    if service.startswith("exec:"):
        command = service[len("exec:"):]
        return "exec", (lambda d, s: serve_shell(d, s, command, False))
    if service == "sync:":
        return "sync", serve_sync
    return None
