"""A stand-in ExecuTorch program for tests that only need a .pte the loader accepts: the root
table offset (8) and the program identifier ET12 at byte 4 (docs/host-qnn.md "The .pte
header"), then the given body."""

from __future__ import annotations

import struct


def fake_program(body: bytes = b"program") -> bytes:
    return struct.pack("<I", 8) + b"ET12" + (body or b"\0")
