"""The adb server's host protocol (smart socket), the part the adb driver uses: connect, send
a service request ("%04x" length + text), read OKAY / FAIL + "%04x" message, read a string
block. Wire format: AOSP packages/modules/adb/SERVICES.TXT and protocol.txt.

Why not adbutils' AdbConnection (the driver used it before): importing adbutils pulls in
requests, urllib3, charset_normalizer, filelock and Pillow, about 0.25 s of a `harness push`
of 0.6 s on this machine; these four calls need none of it. The interface (send_command,
check_okay, read_string_block, .conn) is adbutils' own, so the driver's code did not change.
"""

from __future__ import annotations

import socket
from enum import Enum

_OKAY, _FAIL = b"OKAY", b"FAIL"
_CONNECT_TIMEOUT_S = 3.0  # as adbutils: a server that does not accept in 3 s is not there


class AdbFault(Enum):
    """How a request to the adb server went wrong, decided where the reply is read."""

    UNREACHABLE = "unreachable"  # no connection to the server
    NOT_LISTENING = "not listening"  # nothing listens on its port (connection refused): no server there
    REFUSED = "refused"  # the server answered FAIL: `refusal` holds its message
    CUT = "cut"  # the stream ended (or held something else) where OKAY/FAIL was due
    BROKEN = "broken"  # a reply that could not be read: timeout, a bad length, a closed block


class AdbError(Exception):
    """The adb server refused a request (its FAIL message) or could not be reached. Callers
    read `fault` and `refusal` (the server's own words), never this exception's message."""

    def __init__(self, message: str, fault: AdbFault = AdbFault.BROKEN, refusal: str | None = None):
        super().__init__(message)
        self.fault = fault
        self.refusal = refusal


def _is_ip(host: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return True
        except OSError:
            continue
    return False


class AdbConnection:
    """One TCP connection to an adb server. Never starts a server by itself (adbutils would
    run `adb start-server` on the default port when the configured one does not answer)."""

    def __init__(self, host: str, port: int, timeout: float | None = None):
        # An IP address needs no name lookup, and a str name makes getaddrinfo import the idna
        # codec (~3 ms of a `harness push` start-up): addresses connect directly.
        try:
            if _is_ip(host):
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_STREAM)
                try:
                    sock.settimeout(_CONNECT_TIMEOUT_S)
                    sock.connect((host, port))
                except OSError:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S)
        except OSError as exc:
            fault = AdbFault.NOT_LISTENING if isinstance(exc, ConnectionRefusedError) else AdbFault.UNREACHABLE
            raise AdbError(f"connect to adb server {host}:{port} failed: {exc}", fault) from None
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.settimeout(timeout)
        self._sock: socket.socket | None = sock

    @property
    def conn(self) -> socket.socket:
        if self._sock is None:
            raise AdbError("connection is closed", AdbFault.UNREACHABLE)
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def send_command(self, cmd: str) -> None:
        data = cmd.encode("utf-8")
        self.conn.sendall(b"%04x" % len(data) + data)

    def _read(self, n: int) -> bytes:
        # As adbutils read: up to n bytes, fewer when the server closed the connection; a
        # timeout is the server's answer failing (AdbError), which the driver maps.
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.conn.recv(n - len(buf))
            except TimeoutError:
                raise AdbError("adb read timeout") from None
            if not chunk:
                break
            buf += chunk
        return bytes(buf)

    def read_string_block(self) -> str:
        size = self._read(4)
        if not size:
            raise AdbError("connection closed")
        try:
            n = int(size, 16)
        except ValueError:
            raise AdbError(f"bad length {size!r} from the adb server") from None
        return self._read(n).decode("utf-8", "replace")

    def check_okay(self) -> None:
        status = self._read(4)
        if status == _FAIL:
            message = self.read_string_block()
            raise AdbError(message, AdbFault.REFUSED, message)
        if status != _OKAY:
            raise AdbError(f"Unknown data: {status!r}", AdbFault.CUT)  # adbutils' words


class AdbClient:
    """Where the adb server is; makes connections to it."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port

    def make_connection(self, timeout: float | None = None) -> AdbConnection:
        return AdbConnection(self.host, self.port, timeout)
