"""The adb `sync:` protocol (AOSP SYNC.TXT) over a socket already switched to `sync:`.

Why our own client: adbutils' sync sends 4 KiB DATA chunks and reads with recv(); this one
sends 64 KiB DATA messages (the protocol maximum, as the `adb push` CLI does) from one
reused buffer, and can pipeline several files, so a harness push keeps up with the CLI.

Requests and replies are a 4-byte id plus a little-endian uint32; payloads follow.
Device refusals come back as `FAIL <len> <message>` and are raised as SyncFail; socket
trouble propagates as OSError/EOFError for the caller to classify.
"""

from __future__ import annotations

import collections
import errno
import os
import posixpath
import select
import socket
import stat as stat_mod
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

SYNC_DATA_MAX = 64 * 1024  # protocol limit for one DATA chunk's payload
# What we send per DATA: like the adb CLI, the whole message (8-byte header + payload) is
# 64 KiB, so messages line up with the server's 64/256 KiB packets to the device and adbd
# never has to stitch a chunk across two packets.
SEND_PAYLOAD = SYNC_DATA_MAX - 8
MAX_PATH = 1024  # adbd rejects longer request paths
SOCKET_BUFFER = 4 * 1024 * 1024
_ID_LEN = struct.Struct("<4sI")
_STAT_V1 = struct.Struct("<4sIII")  # "STAT", mode, size, mtime
_STAT_V2 = struct.Struct("<IQQIIIIQqqq")  # error, dev, ino, mode, nlink, uid, gid, size, atime, mtime, ctime
_DENT_V2 = struct.Struct("<4sIQQIIIIQqqqI")  # "DNT2"/"DONE", the STA2 fields, name length (then the name)
_BATCH_CHUNKS = 16  # DATA chunks per readv/sendall  # chunks between checks for an early FAIL while sending


def _requests(ident: bytes, paths: Sequence[str]) -> bytearray:
    """Sync requests for `paths`, to go out in one write (the device answers them in order)."""
    req = bytearray()
    for path in paths:
        raw = path.encode("utf-8")
        if len(raw) > MAX_PATH:
            raise SyncFail(f"path too long ({len(raw)} bytes, adb allows {MAX_PATH}): {path}", path)
        req += _ID_LEN.pack(ident, len(raw)) + raw
    return req


class SyncFail(Exception):
    """The device refused a sync request (its FAIL message); `remote` is the file it was about."""

    def __init__(self, message: str, remote: str | None = None):
        super().__init__(message)
        self.remote = remote


class SyncProtocolError(EOFError):
    """An unexpected reply: the stream is garbled or was cut; treat as a dropped link."""


@dataclass(frozen=True)
class SyncStat:
    mode: int
    size: int
    mtime: int
    inode: int = 0  # only STA2 reports it


def tune_socket(sock: socket.socket) -> None:
    """Large buffers so a 64 KiB chunk never waits on the kernel; no Nagle delay for replies."""
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
        except OSError:
            pass
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass


def _quickack(sock: socket.socket) -> None:
    """Without it, the server's Nagle waits on our delayed ACK (~40 ms) between pipelined replies."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, "TCP_QUICKACK", 12), 1)
    except OSError:
        pass


class SyncClient:
    def __init__(self, sock: socket.socket, on_ack: Callable[[str], None] | None = None):
        self.sock = sock
        self.on_ack = on_ack
        self.pending: collections.deque[str] = collections.deque()  # sent files awaiting OKAY/FAIL
        self._hdr = bytearray(_ID_LEN.size)
        self._batch = bytearray((_ID_LEN.size + SEND_PAYLOAD) * _BATCH_CHUNKS)

    # ---- low level ----------------------------------------------------------------------
    def _request(self, ident: bytes, path: str) -> None:
        raw = path.encode("utf-8")
        if len(raw) > MAX_PATH:
            raise SyncFail(f"path too long ({len(raw)} bytes, adb allows {MAX_PATH}): {path}")
        self.sock.sendall(_ID_LEN.pack(ident, len(raw)) + raw)

    def _recv_into(self, view: memoryview) -> None:
        got = 0
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise SyncProtocolError(f"connection closed after {got} of {len(view)} bytes")
            got += n

    def _recv(self, n: int) -> bytes:
        buf = bytearray(n)
        self._recv_into(memoryview(buf))
        return bytes(buf)

    def _header(self) -> tuple[bytes, int]:
        self._recv_into(memoryview(self._hdr))
        return _ID_LEN.unpack(self._hdr)

    def _fail_message(self, length: int) -> str:
        return self._recv(length).decode("utf-8", "replace")

    def quit(self) -> None:
        try:
            self.sock.sendall(_ID_LEN.pack(b"QUIT", 0))
        except OSError:
            pass  # the session ends either way

    # ---- stat ---------------------------------------------------------------------------
    def stat(self, path: str) -> SyncStat | None:
        """v1 STAT (32-bit fields); None when absent (mode 0)."""
        self._request(b"STAT", path)
        ident, mode, size, mtime = _STAT_V1.unpack(self._recv(_STAT_V1.size))
        if ident != b"STAT":
            raise SyncProtocolError(f"expected STAT reply, got {ident!r}")
        return None if mode == 0 else SyncStat(mode, size, mtime)

    def stat_v2(self, path: str) -> SyncStat | None:
        """STA2 (64-bit sizes, inode); None for ENOENT/ENOTDIR, SyncFail for other errors."""
        return self.stat_v2_many([path])[0]

    def stat_v2_many(self, paths: Sequence[str], window: int = 256) -> list[SyncStat | None]:
        """Pipelined STA2: requests go out in windows without waiting for each reply (the
        device answers a sync stream in order), so n stats cost about one round trip."""
        out: list[SyncStat | None] = []
        for start in range(0, len(paths), window):
            batch = paths[start:start + window]
            self.sock.sendall(_requests(b"STA2", batch))
            out += [self._sta2_reply(path) for path in batch]
        return out

    def _sta2_reply(self, path: str) -> SyncStat | None:
        _quickack(self.sock)  # the server writes each small reply as it comes: ack at once
        ident = self._recv(4)
        if ident != b"STA2":
            raise SyncProtocolError(f"expected STA2 reply, got {ident!r}")
        err, _dev, ino, mode, _nlink, _uid, _gid, size, _atime, mtime, _ctime = _STAT_V2.unpack(
            self._recv(_STAT_V2.size))
        if err in (errno.ENOENT, errno.ENOTDIR):
            return None
        if err:
            raise SyncFail(f"stat failed: {errno.errorcode.get(err, err)}", path)
        return SyncStat(mode, size, mtime, ino)

    def stats(self, paths: Sequence[str], *, use_v2: bool, use_listing: bool) -> list[SyncStat | None]:
        """stat (following links) of each path. With `use_listing` (ls_v2), files are found in
        a LIS2 listing of their folder: one request per folder instead of one per file (each
        STA2 reply is its own adb packet, acknowledged by the server before the next one: 0.15
        ms a file on the virtual lab); the folders' own STA2 go in the same round trip and say
        when an absent folder means absent files. Anything a listing cannot settle (a link,
        an unlistable folder) gets its own STA2."""
        if not use_v2:
            return [self.stat(p) for p in paths]
        folders = sorted({posixpath.dirname(p) for p in paths}) if use_listing else []
        if not folders or len(folders) * 3 > len(paths) or len(folders) > 64:
            return self.stat_v2_many(paths)
        self.sock.sendall(_requests(b"LIS2", folders) + _requests(b"STA2", folders))
        listings = [self._listing() for _ in folders]
        by_folder = {folder: (listing, self._sta2_reply(folder)) for folder, listing in zip(folders, listings)}
        out: list[SyncStat | None] = [None] * len(paths)
        ask: list[int] = []
        for i, path in enumerate(paths):
            folder, name = posixpath.split(path)
            listing, folder_st = by_folder[folder]
            if name in (".", "..", ""):
                ask.append(i)
            elif "." in listing:  # the folder was read: a name it lacks is absent
                st = listing.get(name)
                if name in listing and (st is None or stat_mod.S_ISLNK(st.mode)):
                    ask.append(i)  # STA2 follows the link (or reports the error)
                else:
                    out[i] = st
            elif folder_st is not None:
                ask.append(i)  # a folder that could not be listed
            # else: no such folder (ENOENT/ENOTDIR), so no such file
        for i, st in zip(ask, self.stat_v2_many([paths[i] for i in ask]) if ask else []):
            out[i] = st
        return out

    def _listing(self) -> dict[str, SyncStat | None]:
        """One LIS2 reply: name -> lstat (None where the device could not stat it)."""
        out: dict[str, SyncStat | None] = {}
        while True:
            _quickack(self.sock)
            (ident, err, _dev, ino, mode, _nlink, _uid, _gid, size, _atime, mtime, _ctime,
             namelen) = _DENT_V2.unpack(self._recv(_DENT_V2.size))
            if ident == b"DONE":
                return out
            if ident != b"DNT2" or namelen > MAX_PATH:
                raise SyncProtocolError(f"expected DNT2/DONE in a LIS2 reply, got {ident!r}")
            name = self._recv(namelen).decode("utf-8", "surrogateescape")
            out[name] = None if err else SyncStat(mode, size, mtime, ino)

    # ---- send (push) --------------------------------------------------------------------
    def send_file(self, local: Path, remote: str, mode: int, mtime: int,
                  progress: Callable[[int], None] | None = None) -> int:
        """SEND one file and wait for the device's verdict on it."""
        total = self.send_file_nowait(local, remote, mode, mtime, progress)
        self.wait_acks()
        return total

    def send_file_nowait(self, local: Path, remote: str, mode: int, mtime: int,
                         progress: Callable[[int], None] | None = None, digest: object = None) -> int:
        """SEND one file without waiting for its OKAY (like the adb CLI's deferred acks);
        `on_ack` hears about each acknowledged file, `wait_acks()` collects the rest.
        `digest` (a hashlib object) is fed every byte sent: one read of the file serves both."""
        self._request(b"SEND", f"{remote},{stat_mod.S_IFREG | (mode & 0o7777)}")
        self.pending.append(remote)
        total = 0
        with open(local, "rb", buffering=0) as fin:
            try:
                total = self._send_data(fin, progress, digest)
                self.sock.sendall(_ID_LEN.pack(b"DONE", mtime & 0xFFFFFFFF))
            except OSError as exc:
                if getattr(exc, "filename", None) is not None:
                    raise  # the local file, not the link
                # adbd may have sent FAIL (e.g. no space) and closed; prefer its reason.
                self._raise_pending_fail()
                raise
        return total

    def _send_data(self, fin: BinaryIO, progress: Callable[[int], None] | None, digest: Any = None) -> int:
        """DATA chunks of the file, a batch at a time: one readv fills the payload slots of a
        reused [header|payload|header|payload|...] buffer (64 KiB per message), headers are
        packed in place and the whole batch leaves in one sendall. Per MiB that is two syscalls
        and no extra copies, which keeps the client's CPU near the adb CLI's (64 KiB read + write
        per chunk in C). `digest` hashes each batch right after its send, in this thread, while
        the batch is still in the CPU's cache and the socket buffer (4 MiB) keeps the link busy:
        ~0.3 CPU-s/GiB less than handing batches to a hashing thread (lent buffers, wake-ups,
        cold caches; benchmarks/provision.py), and no hashing left to wait for after the last byte."""
        slot = _ID_LEN.size + SEND_PAYLOAD
        buf = self._batch
        view = memoryview(buf)
        payloads = [view[i * slot + _ID_LEN.size:(i + 1) * slot] for i in range(_BATCH_CHUNKS)]
        fd = fin.fileno()
        total = 0
        while True:
            n = os.readv(fd, payloads)
            if n == 0:
                return total
            full, rest = divmod(n, SEND_PAYLOAD)
            for i in range(full):
                _ID_LEN.pack_into(buf, i * slot, b"DATA", SEND_PAYLOAD)
            end = full * slot
            if rest:
                _ID_LEN.pack_into(buf, end, b"DATA", rest)
                end += _ID_LEN.size + rest
            self.sock.sendall(view[:end])
            if digest is not None:  # after the send: the device's disk works while we hash
                for part in payloads[:full]:
                    digest.update(part)
                if rest:
                    digest.update(payloads[full][:rest])
            total += n
            if progress:
                for _ in range(full):
                    progress(SEND_PAYLOAD)
                if rest:
                    progress(rest)
            self.poll_acks()  # an early FAIL (no space) stops the transfer now

    def _take_ack(self) -> None:
        ident, length = self._header()
        if not self.pending:
            raise SyncProtocolError(f"unexpected {ident!r}: no file is waiting for a reply")
        remote = self.pending.popleft()
        if ident == b"OKAY":
            if self.on_ack is not None:
                self.on_ack(remote)
            return
        if ident == b"FAIL":
            raise SyncFail(self._fail_message(length), remote)
        raise SyncProtocolError(f"expected OKAY/FAIL for {remote}, got {ident!r}")

    def poll_acks(self) -> None:
        """Read the replies that have already arrived, without blocking."""
        while self.pending and select.select([self.sock], [], [], 0)[0]:
            self._take_ack()

    def wait_acks(self, keep: int = 0) -> None:
        """Block until at most `keep` files are still waiting for their reply."""
        while len(self.pending) > keep:
            self._take_ack()

    def _raise_pending_fail(self) -> None:
        try:
            old = self.sock.gettimeout()
            self.sock.settimeout(1.0)
            try:
                while self.pending:
                    self._take_ack()
            finally:
                self.sock.settimeout(old)
        except (OSError, EOFError):
            pass

    # ---- recv (pull) --------------------------------------------------------------------
    def recv_bytes(self, remote: str, max_bytes: int) -> bytes:
        """RECV a small file into memory (SyncFail when the device refuses, e.g. absent)."""
        self._request(b"RECV", remote)
        out = bytearray()
        while True:
            ident, length = self._header()
            if ident == b"DATA":
                if length > SYNC_DATA_MAX:
                    raise SyncProtocolError(f"DATA chunk of {length} bytes exceeds {SYNC_DATA_MAX}")
                out += self._recv(length)
                if len(out) > max_bytes:
                    raise SyncProtocolError(f"{remote} is larger than the {max_bytes} bytes asked for")
            elif ident == b"DONE":
                return bytes(out)
            elif ident == b"FAIL":
                raise SyncFail(self._fail_message(length), remote)
            else:
                raise SyncProtocolError(f"unexpected {ident!r} in RECV reply")

    def recv_file(self, remote: str, local: Path, progress: Callable[[int], None] | None = None) -> int:
        self._request(b"RECV", remote)
        buf = bytearray(SYNC_DATA_MAX)
        view = memoryview(buf)
        total = 0
        with open(local, "wb") as fout:
            while True:
                ident, length = self._header()
                if ident == b"DATA":
                    if length > SYNC_DATA_MAX:
                        raise SyncProtocolError(f"DATA chunk of {length} bytes exceeds {SYNC_DATA_MAX}")
                    chunk = view[:length]
                    self._recv_into(chunk)
                    fout.write(chunk)
                    total += length
                    if progress:
                        progress(length)
                elif ident == b"DONE":
                    return total
                elif ident == b"FAIL":
                    raise SyncFail(self._fail_message(length))
                else:
                    raise SyncProtocolError(f"unexpected {ident!r} in RECV reply")


__all__ = ["SEND_PAYLOAD", "SYNC_DATA_MAX", "SyncClient", "SyncFail", "SyncProtocolError", "SyncStat", "tune_socket"]
