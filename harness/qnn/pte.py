"""The QNN context binaries inside an ExecuTorch program (.pte), found by reading the file's own
format (docs/host-qnn.md "Context binaries inside a PTE"); nothing is imported from ExecuTorch.

A .pte is a flatbuffer (file identifier "ET12" at byte 4, schema `program.fbs`) optionally
followed by data segments; an extended header ("eh00" at byte 8) gives the segment base offset.
Each execution plan lists its `delegates` (BackendDelegate: `id`, `processed`: location INLINE
-> Program.backend_delegate_data[index].data, SEGMENT -> Program.segments[index] {offset, size}
from the segment base). A QnnBackend delegate's processed bytes are ExecuTorch's QNN context
protocol: magic 0x5678ABCD (uint32), a signature (int64), the context binary's size (uint64),
then the context binary, which ExecuTorch 1.5 places at the next 256-byte boundary (byte 256;
older releases right after the 20-byte header).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ArtifactError
from harness.evidence import NPU_BACKEND

QNN_BACKEND_ID = NPU_BACKEND  # one spelling, in the evidence types
_PTE_IDENT = b"ET12"
_EXT_MAGIC = b"eh00"
_QNN_MAGIC = 0x5678ABCD
_QNN_HEAD = struct.Struct("<IqQ")  # magic, signature, context binary size
_MAX_PAD = 4096  # the header is padded to an alignment; more than this is not that protocol


class PteError(ArtifactError):
    """A .pte that is not readable as an ExecuTorch program (the message names the file)."""


@dataclass(frozen=True)
class QnnDelegate:
    """One QnnBackend delegate of a program and where its context binary sits in the file."""

    method: str  # the execution plan's name ("forward")
    index: int  # the delegate's position in that plan
    signature: int  # ExecuTorch's graph signature in the protocol header
    offset: int  # byte offset of the context binary in the .pte
    size: int  # its size in bytes


class _Flat:
    """Bounds-checked reads of a little-endian flatbuffer (tables, vectors, strings)."""

    def __init__(self, buf: bytes, name: str) -> None:
        self.buf = buf
        self.name = name

    def _bad(self, what: str) -> PteError:
        return PteError(f"{self.name}: not a readable ExecuTorch program ({what}); a truncated or corrupt "
                        "copy? Copy the .pte again or re-export")

    def u32(self, pos: int) -> int:
        if pos < 0 or pos + 4 > len(self.buf):
            raise self._bad(f"offset {pos} is past the end of its {len(self.buf)} bytes")
        return int(struct.unpack_from("<I", self.buf, pos)[0])

    def field(self, table: int, index: int) -> int | None:
        """Absolute position of a table's field `index`, None when the field is absent."""
        vtable = table - struct.unpack_from("<i", self.buf, table)[0] if 0 <= table <= len(self.buf) - 4 else -1
        if vtable < 0 or vtable + 4 > len(self.buf):
            raise self._bad(f"table at {table} has no vtable")
        vt_size = struct.unpack_from("<H", self.buf, vtable)[0]
        slot = 4 + 2 * index
        if slot + 2 > vt_size:
            return None
        if vtable + slot + 2 > len(self.buf):
            raise self._bad(f"the vtable at {vtable} runs past the end")
        rel = struct.unpack_from("<H", self.buf, vtable + slot)[0]
        return table + rel if rel else None

    def ref(self, pos: int) -> int:
        return pos + self.u32(pos)

    def vector(self, table: int, index: int) -> list[int]:
        """Positions of a vector-of-tables field's elements."""
        at = self.field(table, index)
        if at is None:
            return []
        vec = self.ref(at)
        n = self.u32(vec)
        if vec + 4 + 4 * n > len(self.buf):
            raise self._bad(f"a vector of {n} entries at {vec} runs past the end")
        return [self.ref(vec + 4 + 4 * i) for i in range(n)]

    def string(self, table: int, index: int) -> str:
        at = self.field(table, index)
        if at is None:
            return ""
        pos = self.ref(at)
        n = self.u32(pos)
        if pos + 4 + n > len(self.buf):
            raise self._bad(f"a string at {pos} runs past the end")
        return self.buf[pos + 4:pos + 4 + n].decode("utf-8", "replace")

    def scalar(self, table: int, index: int, fmt: str, default: int = 0) -> int:
        at = self.field(table, index)
        if at is None:
            return default
        if at + struct.calcsize(fmt) > len(self.buf):
            raise self._bad(f"a field at {at} runs past the end")
        return int(struct.unpack_from("<" + fmt, self.buf, at)[0])

    def bytes_span(self, table: int, index: int) -> tuple[int, int]:
        """(position, length) of a [ubyte] field's data."""
        at = self.field(table, index)
        if at is None:
            return (0, 0)
        vec = self.ref(at)
        return (vec + 4, self.u32(vec))


def _segment_base(flat: _Flat) -> int | None:
    if flat.buf[8:12] != _EXT_MAGIC:
        return None
    # eh00, header length (uint32), program size, segment base offset (uint64 each)
    if len(flat.buf) < 32:
        raise flat._bad("its extended header is cut short")
    return int(struct.unpack_from("<Q", flat.buf, 24)[0])


def _payload(flat: _Flat, program: int, delegate: int, base: int | None) -> tuple[int, int]:
    """(offset, length) in the file of a delegate's processed bytes."""
    ref_at = flat.field(delegate, 1)  # BackendDelegate.processed
    if ref_at is None:
        raise flat._bad("a QnnBackend delegate has no processed data")
    ref = flat.ref(ref_at)
    location = flat.scalar(ref, 0, "b")  # DataLocation: 0 INLINE, 1 SEGMENT
    index = flat.scalar(ref, 1, "I")
    if location == 0:
        inline = flat.vector(program, 3)  # Program.backend_delegate_data
        if index >= len(inline):
            raise flat._bad(f"inline delegate data {index} of {len(inline)}")
        return flat.bytes_span(inline[index], 0)
    segments = flat.vector(program, 4)  # Program.segments
    if base is None or index >= len(segments):
        raise flat._bad(f"delegate segment {index} of {len(segments)} (segment base {base})")
    off = flat.scalar(segments[index], 0, "Q")
    size = flat.scalar(segments[index], 1, "Q")
    start = base + off
    if start + size > len(flat.buf):
        raise PteError(f"{flat.name}: truncated: the QNN delegate's segment ends at byte {start + size} but the file "
                       f"has {len(flat.buf)} bytes (a partial copy?); copy the .pte again")
    return (start, size)


def _context_span(flat: _Flat, start: int, length: int, where: str) -> tuple[int, int, int]:
    """(signature, offset, size) of the context binary inside ExecuTorch's QNN protocol payload."""
    if length < _QNN_HEAD.size:
        raise PteError(f"{where}: the QNN payload is {length} bytes, shorter than its {_QNN_HEAD.size}-byte header")
    magic, signature, size = _QNN_HEAD.unpack_from(flat.buf, start)
    if magic != _QNN_MAGIC:
        raise PteError(f"{where}: the QNN payload starts with 0x{magic:08x}, not ExecuTorch's context protocol "
                       f"magic 0x{_QNN_MAGIC:08X} (an online-prepare or other QNN format this reader does not know)")
    pad = length - size
    if not _QNN_HEAD.size <= pad <= _MAX_PAD or any(flat.buf[start + _QNN_HEAD.size:start + pad]):
        raise PteError(f"{where}: the QNN payload is {length} bytes but its header says a {size}-byte context binary "
                       "(a corrupt or truncated copy?); copy the .pte again")
    return (signature, start + pad, size)


_EXT_HEAD = struct.Struct("<4sIQQQ")  # eh00, header length, program size, segment base, segment data size


def check_program(path: Path) -> None:
    """The program's own header agrees with the file (docs/host-qnn.md "The .pte header"): the
    identifier at byte 4, the root table inside the program, and with an extended header the
    program and its segments inside the file, whose size is exactly segment base + data size.
    PteError naming the file and what is wrong: a truncated, random or corrupt program."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(8 + _EXT_HEAD.size)
    except OSError as exc:
        raise PteError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(head) < 8 or head[4:8] != _PTE_IDENT:
        raise PteError(f"{path}: not an ExecuTorch program (no '{_PTE_IDENT.decode()}' identifier at byte 4; "
                       f"{size} bytes); a corrupt copy or not a .pte: export it again")
    root = struct.unpack_from("<I", head, 0)[0]
    if head[8:12] != _EXT_MAGIC:
        if not 8 <= root < size:
            raise PteError(f"{path}: not a readable ExecuTorch program (its root table at byte {root} is outside "
                           f"its {size} bytes); a truncated or corrupt copy? Copy the .pte again or re-export")
        return
    if len(head) < 8 + _EXT_HEAD.size:
        raise PteError(f"{path}: truncated: its extended header is cut short ({size} bytes); copy the .pte again")
    _, length, program, base, data = _EXT_HEAD.unpack_from(head, 8)
    ends = base + data if length >= 32 else base  # the data size is written from a 32-byte header on
    segments_fit = (base == data == 0) or (program <= base and (ends == size if length >= 32 else ends <= size))
    if not 8 <= root < program <= size or not segments_fit:
        raise PteError(f"{path}: truncated or corrupt: its header says a {program}-byte program and "
                       f"{data} bytes of segments from byte {base} ({base + data} bytes), the file has {size}; "
                       "copy the .pte again or re-export")


def is_pte(path: Path) -> bool:
    """A .pte by name, or any file with ExecuTorch's program identifier at byte 4."""
    if path.suffix == ".pte":
        return True
    try:
        with path.open("rb") as fh:
            return fh.read(8)[4:8] == _PTE_IDENT
    except OSError:
        return False


def open_program(path: Path) -> tuple[_Flat, int]:
    """The program's bytes as a flatbuffer reader and the root table's position. PteError names the file."""
    try:
        buf = path.read_bytes()
    except OSError as exc:
        raise PteError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(buf) < 8 or buf[4:8] != _PTE_IDENT:
        raise PteError(f"{path}: not an ExecuTorch program (no '{_PTE_IDENT.decode()}' identifier at byte 4; "
                       f"{len(buf)} bytes); pass a .pte written by ExecuTorch's to_executorch()")
    flat = _Flat(buf, str(path))
    return flat, flat.u32(0)


def qnn_delegates(path: Path) -> list[QnnDelegate]:
    """Every QnnBackend delegate of the program at `path`, in plan order. PteError names the file."""
    flat, program = open_program(path)
    base = _segment_base(flat)
    found: list[QnnDelegate] = []
    for plan in flat.vector(program, 1):  # Program.execution_plan
        method = flat.string(plan, 0)
        for i, delegate in enumerate(flat.vector(plan, 7)):  # ExecutionPlan.delegates
            if flat.string(delegate, 0) != QNN_BACKEND_ID:
                continue
            start, length = _payload(flat, program, delegate, base)
            sig, off, size = _context_span(flat, start, length, f"{path} ({method} delegate {i})")
            found.append(QnnDelegate(method, i, sig, off, size))
    return found


def context_binaries(path: Path) -> list[tuple[QnnDelegate, bytes]]:
    """Each QnnBackend delegate of a .pte with its context binary's bytes."""
    delegates = qnn_delegates(path)
    if not delegates:
        return []
    buf = path.read_bytes()
    return [(d, buf[d.offset:d.offset + d.size]) for d in delegates]
