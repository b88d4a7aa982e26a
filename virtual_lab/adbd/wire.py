"""The adb transport's framing: message constants, the 24-byte header, raw socket helpers."""

from __future__ import annotations

import socket
import struct

A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_WRTE = 0x45545257
A_CLSE = 0x45534C43
A_VERSION = 0x01000001
MAX_PAYLOAD = 256 * 1024
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
FEATURES = ("shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir")

HEADER = struct.Struct("<6I")  # command, arg0, arg1, length, checksum (0), magic


class ConnectionGone(Exception):
    """The link to the adb server is gone (peer closed, reset, or cut by a fault)."""


def hard_close(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the peer sees the link die, not an orderly goodbye."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def sendall_vec(sock: socket.socket, header: bytes, payload: bytes | bytearray | memoryview) -> None:
    """sendall(header + payload) without copying the payload."""
    bufs = [memoryview(header), memoryview(payload).cast("B")]
    while bufs:
        sent = sock.sendmsg(bufs)
        while sent and bufs:
            if sent >= len(bufs[0]):
                sent -= len(bufs[0])
                bufs.pop(0)
            else:
                bufs[0] = bufs[0][sent:]
                sent = 0
