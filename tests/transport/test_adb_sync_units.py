"""SyncClient's sender without a device: what is sent and what is hashed from it."""

from __future__ import annotations

import hashlib
import os
import struct

from harness.transport import SEND_PAYLOAD, SyncClient


class _Wire:
    """A socket that keeps what is sent (the sender never reads during _send_data here)."""

    def __init__(self) -> None:
        self.sent = bytearray()

    def sendall(self, data) -> None:  # noqa: ANN001 - a memoryview or bytes
        self.sent += bytes(data)


def _payload(wire: bytes) -> bytes:
    """The file bytes out of DATA messages."""
    out, i = bytearray(), 0
    while i < len(wire):
        ident, n = struct.unpack_from("<4sI", wire, i)
        assert ident == b"DATA" and n <= SEND_PAYLOAD
        out += wire[i + 8:i + 8 + n]
        i += 8 + n
    return bytes(out)


def test_the_digest_is_fed_exactly_the_bytes_sent(tmp_path):
    # Sizes around the 16-chunk batch and the 64 KiB payload, sent back to back through one
    # client (one reused batch buffer): a batch hashed after the next read would show.
    sizes = [0, 1, SEND_PAYLOAD, SEND_PAYLOAD * 16, SEND_PAYLOAD * 16 + 1, 5 * (1 << 20) + 12345]
    wire = _Wire()
    client = SyncClient(wire)
    client.poll_acks = lambda: None
    for i, size in enumerate(sizes):
        p = tmp_path / f"f{i}"
        p.write_bytes(os.urandom(size))
        start = len(wire.sent)
        sha = hashlib.sha256()
        with open(p, "rb", buffering=0) as fin:
            assert client._send_data(fin, None, sha) == size
        assert _payload(bytes(wire.sent[start:])) == p.read_bytes()
        assert sha.hexdigest() == hashlib.sha256(p.read_bytes()).hexdigest()


def test_a_plain_hashlib_digest_is_fed_too(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(os.urandom(3 * (1 << 20) + 7))
    client = SyncClient(_Wire())
    client.poll_acks = lambda: None
    h = hashlib.sha256()
    with open(p, "rb", buffering=0) as fin:
        client._send_data(fin, None, h)
    assert h.hexdigest() == hashlib.sha256(p.read_bytes()).hexdigest()
