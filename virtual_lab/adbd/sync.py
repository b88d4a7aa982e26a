"""The sync service (`sync:`): STAT, STA2, LST2, LIST, LIS2, SEND, RECV, QUIT.

SEND follows AOSP `file_sync_service.cpp`: an existing regular file is unlinked first, the
file is created at its final path and written as DATA arrives, parents are created
(`fixed_push_mkdir`), the mode's user bits are copied to group/other, DONE sets the mtime.
On a write failure (ENOSPC) the device answers `FAIL write failed: <strerror>`, drains the
rest and unlinks the file; when the peer goes away mid-file it unlinks too. The drop fault
can instead leave the partial file (an adbd that died mid-write). RECV of a folder answers
`FAIL read failed: Is a directory`, as AOSP's recv_impl does.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from pathlib import Path

from virtual_lab.adbd.contract import AdbdDevice
from virtual_lab.adbd.stream import Stream

SYNC_DATA_MAX = 64 * 1024

_SYNC = struct.Struct("<4sI")
_STAT_V1 = struct.Struct("<4sIII")
_STAT_V2 = struct.Struct("<4sIQQIIIIQqqq")            # 72 bytes
_DENT_V1 = struct.Struct("<4sIIII")                   # 20 bytes + name
_DENT_V2 = struct.Struct("<4sIQQIIIIQqqqI")           # 76 bytes + name


class _SyncFailed(Exception):
    """The sync session ends (after FAIL was sent, or the link went away)."""


def serve_sync(device: AdbdDevice, stream: Stream) -> None:
    sync = _SyncSession(device, stream)
    try:
        while sync.handle_one():
            pass
    except _SyncFailed:
        pass


class _SyncSession:
    def __init__(self, device: AdbdDevice, stream: Stream) -> None:
        self.conn = stream.conn
        self.stream = stream
        self.device = device
        self.sandbox = device.sandbox

    # ---- framing ------------------------------------------------------------------------
    def _read(self, n: int) -> bytes:
        data = self.stream.read_exact(n)
        if data is None:
            raise _SyncFailed()
        return data

    def _reply(self, data: bytes | memoryview) -> None:
        if not self.stream.write(data):
            raise _SyncFailed()

    def _fail(self, message: str) -> None:
        msg = message.encode()
        self.stream.write(_SYNC.pack(b"FAIL", len(msg)) + msg)

    def handle_one(self) -> bool:
        head = self.stream.read_exact(_SYNC.size)
        if head is None:
            return False
        ident, length = _SYNC.unpack(head)
        name = ident.decode("latin-1")
        self.device.counters.bump("sync_requests", name)
        if length > 1024:
            self._fail("path too long")
            return False
        path = self._read(length).decode("utf-8", errors="surrogateescape") if length else ""
        if ident == b"STAT":
            self._stat_v1(path)
        elif ident in (b"STA2", b"LST2"):
            self._stat_v2(ident, path)
        elif ident == b"LIST":
            self._list(path, v2=False)
        elif ident == b"LIS2":
            self._list(path, v2=True)
        elif ident == b"SEND":
            return self._send(path)
        elif ident == b"RECV":
            return self._recv(path)
        elif ident == b"QUIT":
            return False
        else:
            self._fail(f"unknown command {int.from_bytes(ident, 'little'):08x}")
            return False
        return True

    # ---- stat / list --------------------------------------------------------------------
    def _lookup(self, path: str, follow: bool) -> tuple[os.stat_result | None, int]:
        res = self.sandbox.resolve(path, follow_last=follow)
        if res.is_root:
            return os.stat(self.sandbox.root), 0
        if res.host is None:
            return None, errno.ENOENT
        try:
            return (os.stat(res.host) if follow else os.lstat(res.host)), 0
        except OSError as exc:
            return None, exc.errno or errno.ENOENT

    def _stat_v1(self, path: str) -> None:
        st, _ = self._lookup(path, follow=False)  # adbd's v1 STAT is an lstat
        if st is None:
            self._reply(_STAT_V1.pack(b"STAT", 0, 0, 0))
        else:
            self._reply(_STAT_V1.pack(b"STAT", st.st_mode & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF,
                                      int(st.st_mtime) & 0xFFFFFFFF))

    def _stat_v2(self, ident: bytes, path: str) -> None:
        st, err = self._lookup(path, follow=ident == b"STA2")
        if st is None:
            self._reply(_STAT_V2.pack(ident, err, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        else:
            self._reply(_STAT_V2.pack(ident, 0, *_v2_fields(st)))

    def _list(self, path: str, v2: bool) -> None:
        res = self.sandbox.resolve(path, follow_last=True)
        entries: list[tuple[str, os.stat_result | None, int]] = []
        if res.is_root:
            root_st = os.stat(self.sandbox.root)
            entries = [(".", root_st, 0), ("..", root_st, 0)]
            for name in self.sandbox.root_entries():
                st, err = self._lookup("/" + name, follow=False)
                entries.append((name, st, err))
        elif res.host is not None and os.path.isdir(res.host):
            parent = self.sandbox.resolve(res.device + "/..")
            entries.append((".", os.lstat(res.host), 0))
            try:
                up = os.stat(self.sandbox.root) if parent.is_root or parent.host is None else os.lstat(parent.host)
                entries.append(("..", up, 0))
            except OSError:
                pass
            try:
                with os.scandir(res.host) as it:
                    for e in it:
                        try:
                            entries.append((e.name, e.stat(follow_symlinks=False), 0))
                        except OSError as exc:
                            entries.append((e.name, None, exc.errno or errno.EIO))
            except OSError:
                entries = []
        out = bytearray()
        for name, st, err in entries:
            raw = name.encode("utf-8", errors="surrogateescape")
            if v2:
                fields_ = _v2_fields(st) if st is not None else (0,) * 10
                out += _DENT_V2.pack(b"DNT2", err, *fields_, len(raw)) + raw
            elif st is not None:  # v1 skips entries it cannot stat
                out += _DENT_V1.pack(b"DENT", st.st_mode & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF,
                                     int(st.st_mtime) & 0xFFFFFFFF, len(raw)) + raw
        if v2:
            out += _DENT_V2.pack(b"DONE", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        else:
            out += _DENT_V1.pack(b"DONE", 0, 0, 0, 0)
        self._reply(bytes(out))

    # ---- send ---------------------------------------------------------------------------
    def _send(self, spec: str) -> bool:
        path, comma, mode_text = spec.rpartition(",")
        if not comma:
            self._fail("missing , in ID_SEND_V1")
            return False
        mode = _strtoul(mode_text)
        if mode is None:
            self._fail("bad mode")
            return False
        if stat.S_ISLNK(mode):
            return self._send_link(path)
        res = self.sandbox.resolve(path, follow_last=False)
        if res.host is None or not res.writable or res.is_root:
            return self._fail_and_drain(f"couldn't create file: {os.strerror(errno.EROFS)}")
        host = res.host
        do_unlink = True
        try:
            st = os.lstat(host)
            do_unlink = stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)
        except FileNotFoundError:
            pass
        except OSError:
            pass
        if do_unlink:
            try:
                os.unlink(host)
            except OSError:
                pass
        mode &= 0o777
        mode |= (mode >> 3) & 0o070
        mode |= (mode >> 3) & 0o007
        try:
            fd = self._create(res.device, host, mode)
        except OSError as exc:
            prefix = "secure_mkdirs failed" if getattr(exc, "mkdirs", False) else "couldn't create file"
            return self._fail_and_drain(f"{prefix}: {os.strerror(exc.errno or errno.EIO)}")
        try:
            os.fchmod(fd, mode)
            ok, mtime = self._receive_file(fd)
        finally:
            os.close(fd)
        if not ok:
            self.device.counters.add(send_failures=1)
            if do_unlink and not (self.conn.aborted and self.conn.keep_partial):
                try:
                    os.unlink(host)
                except OSError:
                    pass
            return False
        try:
            os.utime(host, (mtime, mtime), follow_symlinks=False)
        except OSError:
            pass
        self.device.counters.add(send_files=1)
        self._reply(_SYNC.pack(b"OKAY", 0))
        return True

    def _create(self, device_path: str, host: Path, mode: int) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            return os.open(host, flags, mode)
        except FileNotFoundError:
            self._mkdirs(device_path.rsplit("/", 1)[0])
            return os.open(host, flags, mode)
        except FileExistsError:
            return os.open(host, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW, mode)

    def _mkdirs(self, device_dir: str) -> None:
        """Create parents the way the device sees them (links followed inside the sandbox)."""
        partial = ""
        for comp in [c for c in device_dir.split("/") if c]:
            partial += "/" + comp
            res = self.sandbox.resolve(partial)
            if res.is_root:
                continue
            if res.host is None or not res.writable:
                if res.host is not None and os.path.isdir(res.host):
                    continue
                err = OSError(errno.EROFS, os.strerror(errno.EROFS))
                err.mkdirs = True  # type: ignore[attr-defined]  # a mark the caller reads on this OSError
                raise err
            try:
                os.mkdir(res.host, 0o775)
            except FileExistsError:
                pass
            except OSError as exc:
                exc.mkdirs = True  # type: ignore[attr-defined]  # a mark the caller reads on this OSError
                raise

    def _receive_file(self, fd: int) -> tuple[bool, int]:
        """DATA chunks into fd until DONE. (ok, mtime); on failure FAIL was sent or the link died."""
        free = self.device.disk.free_bytes()
        written = 0
        faults = self.device.faults
        counters = self.device.counters
        try:
            while True:
                head = self.stream.read_exact(_SYNC.size)
                if head is None:
                    return False, 0
                ident, length = _SYNC.unpack(head)
                if ident == b"DONE":
                    return True, length
                if ident != b"DATA":
                    self._fail("invalid data message")
                    return False, 0
                if length > SYNC_DATA_MAX:
                    self._fail("oversize data message")
                    return False, 0
                need = length
                while need:
                    piece = self.stream.read_chunk(need)
                    if piece is None:
                        return False, 0
                    need -= len(piece)
                    decision = faults.take_drop_budget(len(piece), "send")
                    if decision.allowed < len(piece):
                        piece = piece[:decision.allowed]
                    if written + len(piece) > free:
                        room = max(0, free - written)
                        _write_all(fd, piece[:room])
                        counters.add(send_bytes=room)
                        self.device.disk.note_written(room)
                        return self._fail_and_drain(f"write failed: {os.strerror(errno.ENOSPC)}"), 0
                    try:
                        _write_all(fd, piece)
                    except OSError as exc:
                        return self._fail_and_drain(f"write failed: {os.strerror(exc.errno or errno.EIO)}"), 0
                    written += len(piece)
                    counters.add(send_bytes=len(piece))
                    self.device.disk.note_written(len(piece))
                    if decision.fire:
                        self.conn.abort(keep_partial=decision.keep_partial)
                        return False, 0
        except _SyncFailed:
            return False, 0

    def _fail_and_drain(self, message: str) -> bool:
        """adbd's failure path: FAIL, then swallow DATA until DONE (old clients keep sending).

        Returns False: after a failed SEND adbd ends the sync session."""
        self._fail(message)
        while True:
            head = self.stream.read_exact(_SYNC.size)
            if head is None:
                break
            ident, length = _SYNC.unpack(head)
            if ident == b"DONE" or ident != b"DATA" or length > SYNC_DATA_MAX:
                break
            if self.stream.read_exact(length) is None:
                break
        return False

    def _send_link(self, path: str) -> bool:
        head = self._read(_SYNC.size)
        ident, length = _SYNC.unpack(head)
        if ident != b"DATA" or length > SYNC_DATA_MAX:
            self._fail("invalid data message: expected ID_DATA")
            return False
        target = self._read(length).split(b"\0", 1)[0].decode("utf-8", errors="surrogateescape")
        res = self.sandbox.resolve(path, follow_last=False)
        if res.host is None or not res.writable:
            self._fail(f"symlink failed: {os.strerror(errno.EROFS)}")
            return False
        try:
            if os.path.lexists(res.host):
                os.unlink(res.host)
            try:
                os.symlink(target, res.host)
            except FileNotFoundError:
                self._mkdirs(res.device.rsplit("/", 1)[0])
                os.symlink(target, res.host)
        except OSError as exc:
            self._fail(f"symlink failed: {os.strerror(exc.errno or errno.EIO)}")
            return False
        head = self._read(_SYNC.size)
        if head[:4] != b"DONE":
            self._fail("invalid data message: expected ID_DONE")
            return False
        self._reply(_SYNC.pack(b"OKAY", 0))
        return True

    # ---- recv ---------------------------------------------------------------------------
    def _recv(self, path: str) -> bool:
        res = self.sandbox.resolve(path, follow_last=True)
        if res.host is None:
            self._fail(f"open failed: {os.strerror(errno.ENOENT)}")
            return False
        try:
            fd = os.open(res.host, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self._fail(f"open failed: {os.strerror(exc.errno or errno.EIO)}")
            return False
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                # AOSP recv_impl: open(O_RDONLY) of a folder succeeds and the first read fails
                # with EISDIR, answered as `FAIL read failed: Is a directory` (session ends).
                self._fail(f"read failed: {os.strerror(errno.EISDIR)}")
                return False
            return self._send_file_frames(fd)
        finally:
            os.close(fd)

    def _send_file_frames(self, fd: int) -> bool:
        # Each WRTE carries whole DATA messages (header + up to 64 KiB) read straight into
        # the frame buffer: no per-byte Python work, one copy from the page cache.
        max_out = self.conn.max_out
        per = min(SYNC_DATA_MAX, max_out) - _SYNC.size
        frame = bytearray(max_out)
        view = memoryview(frame)
        counters = self.device.counters
        total = 0
        with open(fd, "rb", buffering=0, closefd=False) as fh:
            while True:
                pos = 0
                eof = False
                while pos + _SYNC.size < max_out:
                    room = min(per, max_out - pos - _SYNC.size)
                    try:
                        n = fh.readinto(view[pos + _SYNC.size:pos + _SYNC.size + room])
                    except OSError as exc:
                        if pos:
                            self._reply(view[:pos])
                        self._fail(f"read failed: {os.strerror(exc.errno or errno.EIO)}")
                        return False
                    if not n:
                        eof = True
                        break
                    _SYNC.pack_into(frame, pos, b"DATA", n)
                    pos += _SYNC.size + n
                    total += n
                    counters.add(recv_bytes=n)
                done_in_frame = False
                if eof and pos + _SYNC.size <= max_out:
                    _SYNC.pack_into(frame, pos, b"DONE", 0)
                    pos += _SYNC.size
                    done_in_frame = True
                if pos:
                    self._reply(view[:pos])
                if eof:
                    if not done_in_frame:
                        self._reply(_SYNC.pack(b"DONE", 0))
                    counters.add(recv_files=1)
                    return True


def _write_all(fd: int, data: memoryview | bytes) -> None:
    view = memoryview(data)
    while len(view):
        n = os.write(fd, view)
        view = view[n:]


def _v2_fields(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mode & 0xFFFFFFFF, st.st_nlink & 0xFFFFFFFF,
            st.st_uid & 0xFFFFFFFF, st.st_gid & 0xFFFFFFFF, st.st_size,
            int(st.st_atime), int(st.st_mtime), int(st.st_ctime))


def _strtoul(text: str) -> int | None:
    """C strtoul(text, nullptr, 0): 0x hex, leading 0 octal, else decimal."""
    t = text.strip()
    try:
        if t.lower().startswith("0x"):
            return int(t, 16)
        if t.startswith("0") and len(t) > 1:
            return int(t, 8)
        return int(t or "0", 10)
    except ValueError:
        return None
