"""SyncClient's sender and the ChunkHasher, without a device: what is sent and what is hashed."""

from __future__ import annotations

import hashlib
import os
import struct

import pytest

from harness.transport.adb_sync import SEND_PAYLOAD, ChunkHasher, SyncClient


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


@pytest.mark.parametrize("limit", [1 << 20, 3 << 20, 256 << 20])
def test_hashes_of_lent_buffers_match_what_was_sent(tmp_path, limit):
    # Sizes around the 16-chunk batch and the 64 KiB payload; a pool of one buffer makes each
    # batch wait for the previous one's hash, so a buffer reused too early would show.
    sizes = [0, 1, SEND_PAYLOAD, SEND_PAYLOAD * 16, SEND_PAYLOAD * 16 + 1, 5 * (1 << 20) + 12345]
    files = []
    for i, size in enumerate(sizes):
        p = tmp_path / f"f{i}"
        p.write_bytes(os.urandom(size))
        files.append(p)
    wire = _Wire()
    client = SyncClient(wire)
    client.poll_acks = lambda: None
    hasher = ChunkHasher(limit=limit)
    got: dict[str, str] = {}
    for p in files:
        start = len(wire.sent)
        tap = hasher.tap()
        with open(p, "rb", buffering=0) as fin:
            assert client._send_data(fin, None, tap) == p.stat().st_size
        hasher.done(tap, p.name, got.__setitem__)
        assert _payload(bytes(wire.sent[start:])) == p.read_bytes()
    hasher.close()
    assert got == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    assert hasher._made * (SEND_PAYLOAD + 8) * 16 <= max(limit, (SEND_PAYLOAD + 8) * 16)  # the pool stays in its limit


def test_a_plain_hashlib_digest_is_fed_too(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(os.urandom(3 * (1 << 20) + 7))
    client = SyncClient(_Wire())
    client.poll_acks = lambda: None
    h = hashlib.sha256()
    with open(p, "rb", buffering=0) as fin:
        client._send_data(fin, None, h)
    assert h.hexdigest() == hashlib.sha256(p.read_bytes()).hexdigest()
