"""The two shell services of adbd, read off an opened device stream: exit codes are real with
shell v2 (packets: id byte, little-endian u32 length, payload), and on the v1 `shell:` path a
per-call random marker line carries the status (stdout and stderr merged; stderr empty).

The transport (transport.py) opens the stream and maps link faults; these functions only read it.
A read past the command's deadline ends in a timed-out RawExec (the base class then kills the
device process by pid).
"""

from __future__ import annotations

import os
import re
import socket
import time

from harness.transport.command import quote_argv
from harness.transport.types import RawExec

SHELL_PKT_STDIN, SHELL_PKT_STDOUT, SHELL_PKT_STDERR, SHELL_PKT_EXIT, SHELL_PKT_CLOSE_STDIN = 0, 1, 2, 3, 4
V1_MARKER = "X4EXIT-"


class ShellDeadline(Exception):
    """A shell command ran past its timeout (internal)."""


def v2_service(command: str) -> str:
    return f"shell,v2,raw:{command}"


def read_v2(sock: socket.socket, deadline: float | None) -> RawExec:
    """Packets until the exit packet. Link faults (OSError, EOFError) propagate."""
    out, err = bytearray(), bytearray()
    try:
        # Close the program's stdin at once, as the CLI does (nothing is ever sent to it).
        sock.sendall(bytes([SHELL_PKT_CLOSE_STDIN]) + b"\0\0\0\0")
        while True:
            header = recv_exact(sock, 5, deadline)
            kind, length = header[0], int.from_bytes(header[1:5], "little")
            payload = recv_exact(sock, length, deadline) if length else b""
            if kind == SHELL_PKT_STDOUT:
                out += payload
            elif kind == SHELL_PKT_STDERR:
                err += payload
            elif kind == SHELL_PKT_EXIT:
                return RawExec(bytes(out), bytes(err), payload[0] if payload else 255)
    except ShellDeadline:
        # Abandon our side; the base class kills the device process by pid.
        return RawExec(bytes(out), bytes(err), -1, timed_out=True)


def v1_service(command: str) -> tuple[str, re.Pattern[bytes]]:
    """v1 `shell:` has no exit status: run the command in a child `sh`, then print a line
    `MARKER:STATUS` with a per-call random marker. Returns the service and the marker line."""
    nonce = os.urandom(16).hex()  # uuid4's randomness, without uuid's import cost
    line = re.compile(rb"\n" + re.escape(f"{V1_MARKER}{nonce}".encode()) + rb":(\d{1,3})\n")
    # printf joins the marker's halves, so the whole marker never stands in a command line
    # (`ps` output cannot fake it); its leading newline puts it on a line of its own after
    # unterminated output; "$?" is expanded before printf runs: the command's status.
    wrapped = (f"{quote_argv(['sh', '-c', command])}; "
               f"printf '\\n%s%s:%s\\n' {V1_MARKER} {nonce} \"$?\"")
    return f"shell:{wrapped}", line


def read_v1(sock: socket.socket, deadline: float | None, marker: re.Pattern[bytes]) -> RawExec:
    """Output up to the end of the stream, the marker line taken out. Output may follow the
    marker line (a background child writing late, an adbd that sends stderr after stdout): it
    is kept as output. A stream that ends (or a link fault) before the marker line raises
    EOFError / the fault: the command may have run. After the marker, a fault only cuts late
    output of a background child."""
    data = bytearray()
    found: re.Match[bytes] | None = None
    try:
        while True:
            try:
                chunk = recv_some(sock, deadline)
            except ShellDeadline:
                if found is None:
                    return RawExec(bytes(data), b"", -1, timed_out=True)
                break  # the command ended; a background child still holds the stream open
            if not chunk:
                break
            data += chunk
            if found is None:
                found = marker.search(data, max(0, len(data) - len(chunk) - 64))
    except (OSError, EOFError):
        if found is None:
            raise
        # The command's status arrived; only late output of a background child is cut.
    if found is None:
        raise EOFError("output ended before the exit marker")
    return RawExec(bytes(data[:found.start()] + data[found.end():]), b"", int(found.group(1)))


def remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise ShellDeadline()
    return left


def recv_some(sock: socket.socket, deadline: float | None, size: int = 1 << 16) -> bytes:
    sock.settimeout(remaining(deadline))
    try:
        return sock.recv(size)
    except TimeoutError:
        raise ShellDeadline() from None


def recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        sock.settimeout(remaining(deadline))
        try:
            k = sock.recv_into(view[got:])
        except TimeoutError:
            raise ShellDeadline() from None
        if k == 0:
            raise EOFError(f"stream closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


__all__ = ["ShellDeadline", "read_v1", "read_v2", "v1_service", "v2_service"]
