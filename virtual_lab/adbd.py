"""The adbd wire protocol, as the real Debian adb server (29) and adbutils (2.12) use it.

Transport: 24-byte headers (six LE uint32), CNXN (version 0x01000001, maxdata 256 KiB,
checksums 0), AUTH only for the `unauthorized` fault, OPEN/OKAY/WRTE/CLSE streams with one
WRTE in flight per direction per stream. Services: `shell:` (v1, stdout+stderr merged, no
exit code), `shell,v2,...:` (packets: 0 stdin, 1 stdout, 2 stderr, 3 exit, 4 close-stdin,
5 window size), `exec:` (like v1), `sync:` (STAT, STA2, LST2, LIST, LIS2, SEND, RECV, QUIT).
Anything else is refused with CLSE.

Sync SEND follows AOSP `file_sync_service.cpp`: an existing regular file is unlinked first,
the file is created at its final path and written as DATA arrives, parents are created
(`fixed_push_mkdir`), the mode's user bits are copied to group/other, DONE sets the mtime.
On a write failure (ENOSPC) the device answers `FAIL write failed: <strerror>`, drains the
rest and unlinks the file; when the peer goes away mid-file it unlinks too. The drop fault
can instead leave the partial file (an adbd that died mid-write).

One thread reads each connection; each stream's service runs in its own thread. Inbound
WRTEs are queued per stream and acknowledged at once while the queue is short (so the
server keeps sending while the service writes), later otherwise (bounded memory).
"""

from __future__ import annotations

import collections
import errno
import os
import secrets
import selectors
import signal
import socket
import stat
import struct
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from virtual_lab.device import VirtualDevice

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

SYNC_DATA_MAX = 64 * 1024
SOCKET_BUFFER = 4 * 1024 * 1024
INBOUND_WINDOW = 8  # WRTEs queued per stream before acknowledgements are held back

_HEADER = struct.Struct("<6I")
_SYNC = struct.Struct("<4sI")
_STAT_V1 = struct.Struct("<4sIII")
_STAT_V2 = struct.Struct("<4sIQQIIIIQqqq")            # 72 bytes
_DENT_V1 = struct.Struct("<4sIIII")                   # 20 bytes + name
_DENT_V2 = struct.Struct("<4sIQQIIIIQqqqI")           # 76 bytes + name
_SHELL_PKT = struct.Struct("<BI")
ID_STDIN, ID_STDOUT, ID_STDERR, ID_EXIT, ID_CLOSE_STDIN, ID_WINDOW = 0, 1, 2, 3, 4, 5


class _ConnectionGone(Exception):
    pass


# ============================================================================================
class AdbdServer:
    """Listens on host:port and serves adbd connections for one VirtualDevice."""

    def __init__(self, device: "VirtualDevice", host: str = "127.0.0.1", port: int = 0) -> None:
        self.device = device
        self.host = host
        self._want_port = port
        self.port = 0
        self._sock: socket.socket | None = None
        self._stopped = threading.Event()
        self._conns: set[_Connection] = set()
        self._lock = threading.Lock()
        self._accept_thread: threading.Thread | None = None
        self._busy = threading.Condition()
        self._active_services = 0

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self._want_port))
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"virtual device {self.device.spec.name!r}: cannot listen on "
                                     f"{self.host}:{self._want_port}: {exc.strerror}") from None
        sock.listen(16)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._stopped.clear()
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True,
                                               name=f"adbd-accept-{self.device.spec.name}")
        self._accept_thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)  # wakes accept()
            except OSError:
                pass
            self._sock.close()
            self._sock = None
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=5)
            self._accept_thread = None
        conns = self.abort_connections()
        for c in conns:
            c.join(timeout=5)

    def abort_connections(self) -> list["_Connection"]:
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.abort(keep_partial=True)
        return conns

    def grant_pending_auth(self) -> None:
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.grant_auth()

    def service_started(self) -> None:
        with self._busy:
            self._active_services += 1

    def service_finished(self) -> None:
        with self._busy:
            self._active_services -= 1
            self._busy.notify_all()

    def wait_idle(self, timeout: float = 10) -> bool:
        """Wait until no service (shell, sync) is running: its clean-up and counters are done."""
        with self._busy:
            return self._busy.wait_for(lambda: self._active_services == 0, timeout)

    def forget(self, conn: "_Connection") -> None:
        with self._lock:
            self._conns.discard(conn)

    def _accept_loop(self) -> None:
        sock = self._sock
        assert sock is not None
        while not self._stopped.is_set():
            try:
                client, _ = sock.accept()
            except OSError:
                return
            if self._stopped.is_set():
                client.close()
                return
            if self.device.faults.is_offline():
                self.device.faults.note_offline_refusal()
                _hard_close(client)
                self.device.flush_counters()  # another process may be watching counters.json
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                try:
                    client.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
                except OSError:
                    pass
            conn = _Connection(self, client)
            with self._lock:
                self._conns.add(conn)
            conn.start()


def _hard_close(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the peer sees the link die, not an orderly goodbye."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


# ============================================================================================
class _Connection:
    """One transport connection from the adb server."""

    def __init__(self, server: AdbdServer, sock: socket.socket) -> None:
        self.server = server
        self.device = server.device
        self.sock = sock
        self.max_out = MAX_PAYLOAD
        self._send_lock = threading.Lock()
        self._streams: dict[int, _Stream] = {}
        self._streams_lock = threading.Lock()
        self._next_id = 1
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"adbd-conn-{self.device.spec.name}")
        self.aborted = False
        self.keep_partial = False
        self._auth_pending = False
        self._online = False

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # ---- sending ------------------------------------------------------------------------
    def send(self, command: int, arg0: int, arg1: int, payload: bytes | bytearray | memoryview = b"") -> None:
        n = len(payload)
        if command == A_WRTE and n:
            decision = self.device.faults.take_drop_budget(n, "any")
            if decision.fire:
                self.abort(keep_partial=decision.keep_partial)
                raise _ConnectionGone()
            self.device.throttle.consume(n)
        header = _HEADER.pack(command, arg0, arg1, n, 0, command ^ 0xFFFFFFFF)
        with self._send_lock:
            try:
                if n:
                    _sendall_vec(self.sock, header, payload)
                else:
                    self.sock.sendall(header)
            except OSError:
                raise _ConnectionGone() from None

    def abort(self, keep_partial: bool) -> None:
        """Cut the link abruptly (fault injection, offline, stop)."""
        if not self.aborted:
            self.aborted = True
            self.keep_partial = keep_partial
            self.device.counters.add(connections_aborted=1)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the reader thread
        except OSError:
            pass

    def grant_auth(self) -> None:
        if self._auth_pending and not self.aborted:
            self._auth_pending = False
            self._send_cnxn()

    # ---- reading ------------------------------------------------------------------------
    def _recv_exact(self, buf: bytearray | memoryview) -> None:
        view = memoryview(buf)
        got = 0
        n = len(view)
        while got < n:
            k = self.sock.recv_into(view[got:], n - got, socket.MSG_WAITALL)
            if k == 0:
                raise _ConnectionGone()
            got += k

    def _run(self) -> None:
        self.device.counters.add(connections=1)
        header = bytearray(_HEADER.size)
        try:
            while True:
                self._recv_exact(header)
                command, arg0, arg1, length, _check, magic = _HEADER.unpack(header)
                if magic != command ^ 0xFFFFFFFF or length > 4 * MAX_PAYLOAD:
                    return  # not adb: drop the link like adbd does
                payload = bytearray(length)
                if length:
                    self._recv_exact(payload)
                self._dispatch(command, arg0, arg1, payload)
        except (_ConnectionGone, OSError):
            pass
        finally:
            self._teardown()

    def _dispatch(self, command: int, arg0: int, arg1: int, payload: bytearray) -> None:
        if command == A_CNXN:
            self._on_cnxn(arg1)
        elif command == A_AUTH:
            self._on_auth(arg0)
        elif not self._online:
            return  # streams before the handshake completed: ignore, as adbd does
        elif command == A_OPEN:
            self._on_open(arg0, bytes(payload))
        elif command == A_WRTE:
            stream = self._stream(arg1)
            if len(payload):
                decision = self.device.faults.take_drop_budget(len(payload), "any")
                if decision.fire:
                    self.abort(keep_partial=decision.keep_partial)
                    raise _ConnectionGone()
                self.device.throttle.consume(len(payload))
            if stream is not None:
                stream.feed(payload)
        elif command == A_OKAY:
            stream = self._stream(arg1)
            if stream is not None:
                stream.on_okay(arg0)
        elif command == A_CLSE:
            stream = self._stream(arg1)
            if stream is not None:
                stream.on_remote_close()

    def _on_cnxn(self, server_maxdata: int) -> None:
        self.max_out = max(4096, min(MAX_PAYLOAD, server_maxdata or MAX_PAYLOAD))
        for s in self._all_streams():  # a new CNXN restarts the transport
            s.on_remote_close()
        if self.device.faults.settings.unauthorized:
            self._auth_pending = True
            self.device.faults.note_auth_refusal()
            self.send(A_AUTH, AUTH_TOKEN, 0, secrets.token_bytes(20))
            self.device.flush_counters()
            return
        self._send_cnxn()

    def _on_auth(self, auth_type: int) -> None:
        if not self._auth_pending:
            return
        if auth_type == AUTH_SIGNATURE:  # the server tried a key: refuse, ask again
            self.device.faults.note_auth_refusal()
            self.send(A_AUTH, AUTH_TOKEN, 0, secrets.token_bytes(20))
        # AUTH_RSAPUBLICKEY: a real device now shows the "Allow USB debugging?" dialog;
        # nobody taps it until the fault is switched off (grant_auth).

    def _send_cnxn(self) -> None:
        # No trailing NUL: adb 29 keeps it as part of the last feature name.
        banner = self.device.banner(FEATURES).encode()
        self._online = True
        self.send(A_CNXN, A_VERSION, MAX_PAYLOAD, banner)

    def _on_open(self, remote_id: int, payload: bytes) -> None:
        service = payload.split(b"\0", 1)[0].decode("utf-8", errors="surrogateescape")
        handler = _route(service)
        if handler is None:
            self.device.counters.bump("service_opens", "refused")
            self.send(A_CLSE, 0, remote_id)
            return
        kind, target = handler
        self.device.counters.bump("service_opens", kind)
        with self._streams_lock:
            local_id = self._next_id
            self._next_id += 1
            stream = _Stream(self, local_id, remote_id)
            self._streams[local_id] = stream
        self.server.service_started()
        try:
            self.send(A_OKAY, local_id, remote_id)
            threading.Thread(target=_run_service, args=(target, self, stream), daemon=True,
                             name=f"adbd-{kind}-{self.device.spec.name}").start()
        except BaseException:
            self.server.service_finished()
            raise

    def _stream(self, local_id: int) -> "_Stream | None":
        with self._streams_lock:
            return self._streams.get(local_id)

    def _all_streams(self) -> list["_Stream"]:
        with self._streams_lock:
            return list(self._streams.values())

    def forget_stream(self, local_id: int) -> None:
        with self._streams_lock:
            self._streams.pop(local_id, None)

    def _teardown(self) -> None:
        for s in self._all_streams():
            s.on_remote_close()
        if self.aborted:
            _hard_close(self.sock)
        else:
            self.sock.close()
        self.server.forget(self)
        self.device.flush_counters()


def _sendall_vec(sock: socket.socket, header: bytes, payload: bytes | bytearray | memoryview) -> None:
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


# ============================================================================================
class _Stream:
    """One OPENed service: an inbound byte queue and a flow-controlled outbound side."""

    def __init__(self, conn: _Connection, local_id: int, remote_id: int) -> None:
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self._cond = threading.Condition()
        self._chunks: collections.deque[memoryview] = collections.deque()
        self._owed_ack = False
        self._can_send = True
        # Small replies written while a WRTE awaits its OKAY are coalesced into the next one, as
        # adbd's socket buffer does: pipelined sync requests then cost one round trip, not n.
        self._pending = bytearray()
        self._write_lock = threading.Lock()
        self.remote_closed = False
        self.local_closed = False

    # ---- inbound (reader thread) --------------------------------------------------------
    def feed(self, payload: bytearray) -> None:
        with self._cond:
            if self.remote_closed or self.local_closed:
                return
            self._chunks.append(memoryview(payload))
            ack_now = len(self._chunks) <= INBOUND_WINDOW
            if not ack_now:
                self._owed_ack = True
            self._cond.notify_all()
        if ack_now:
            self._send_okay()

    def on_okay(self, remote_id: int) -> None:
        with self._cond:
            if remote_id:
                self.remote_id = remote_id
            if self._pending and not (self.remote_closed or self.local_closed):
                piece, self._pending = bytes(self._pending), bytearray()
                self._send_wrte(piece)  # under the lock: nothing can overtake it
            else:
                self._pending.clear()
                self._can_send = True
            self._cond.notify_all()

    def _send_wrte(self, piece: bytes | memoryview) -> bool:
        try:
            self.conn.send(A_WRTE, self.local_id, self.remote_id, piece)
        except _ConnectionGone:
            self.remote_closed = True
            self._cond.notify_all()
            return False
        return True

    def on_remote_close(self) -> None:
        with self._cond:
            self.remote_closed = True
            self._cond.notify_all()
        self.conn.forget_stream(self.local_id)

    def _send_okay(self) -> None:
        try:
            self.conn.send(A_OKAY, self.local_id, self.remote_id)
        except _ConnectionGone:
            pass

    # ---- inbound (service thread) -------------------------------------------------------
    def read_chunk(self, max_n: int) -> memoryview | None:
        """Up to max_n bytes (at least 1); None once the stream is closed and drained."""
        with self._cond:
            while not self._chunks:
                if self.remote_closed or self.local_closed:
                    return None
                self._cond.wait()
            head = self._chunks[0]
            if len(head) <= max_n:
                self._chunks.popleft()
                piece = head
            else:
                piece = head[:max_n]
                self._chunks[0] = head[max_n:]
            ack = self._owed_ack and len(self._chunks) < INBOUND_WINDOW
            if ack:
                self._owed_ack = False
        if ack:
            self._send_okay()
        return piece

    def read_exact(self, n: int) -> bytes | None:
        parts: list[memoryview] = []
        need = n
        while need:
            piece = self.read_chunk(need)
            if piece is None:
                return None
            parts.append(piece)
            need -= len(piece)
        return b"".join(parts) if len(parts) != 1 else bytes(parts[0])

    # ---- outbound -----------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> bool:
        """Send data as WRTEs (each waits for the previous OKAY). False if the stream closed."""
        view = memoryview(data).cast("B")
        with self._write_lock:
            for off in range(0, len(view), self.conn.max_out):
                if not self._write_one(view[off:off + self.conn.max_out]):
                    return False
        return True

    def _write_one(self, piece: memoryview) -> bool:
        with self._cond:
            # Wait while a WRTE is in flight and this piece would not fit the next one.
            while not self._can_send and len(self._pending) + len(piece) > self.conn.max_out:
                if self.remote_closed or self.local_closed:
                    return False
                self._cond.wait()
            if self.remote_closed or self.local_closed:
                return False
            if not self._can_send:
                self._pending += piece
                return True
            self._can_send = False
            sent = self._send_wrte(piece)
        if not sent:
            self.on_remote_close()
        return sent

    def close(self) -> None:
        with self._cond:
            if self.local_closed:
                return
            # Coalesced output goes out before the CLSE (bounded: a peer that never OKAYs is gone).
            deadline = time.monotonic() + 10
            while self._pending and not self.remote_closed and time.monotonic() < deadline:
                self._cond.wait(0.5)
            self.local_closed = True
            send = not self.remote_closed
            self._cond.notify_all()
        if send:
            try:
                self.conn.send(A_CLSE, self.local_id, self.remote_id)
            except _ConnectionGone:
                pass
        self.conn.forget_stream(self.local_id)


# ============================================================================================
ServiceFn = Callable[[_Connection, _Stream], None]


def _route(service: str) -> tuple[str, ServiceFn] | None:
    if service.startswith("shell"):
        head, sep, command = service.partition(":")
        if not sep:
            return None
        args = head.split(",")[1:] if head.startswith("shell,") else ([] if head == "shell" else None)
        if args is None:
            return None
        v2 = "v2" in args
        return ("shell_v2" if v2 else "shell"), (lambda c, s: _serve_shell(c, s, command, v2))
    if service.startswith("exec:"):
        command = service[len("exec:"):]
        return "exec", (lambda c, s: _serve_shell(c, s, command, False))
    if service == "sync:":
        return "sync", _serve_sync
    return None


def _run_service(target: ServiceFn, conn: _Connection, stream: _Stream) -> None:
    try:
        target(conn, stream)
    except _ConnectionGone:
        pass
    finally:
        try:
            stream.close()
            conn.device.flush_counters()
        finally:
            conn.server.service_finished()


# ---- shell --------------------------------------------------------------------------------
def _serve_shell(conn: _Connection, stream: _Stream, command: str, v2: bool) -> None:
    if not command.strip():
        # An interactive shell (no pty here): read commands from stdin.
        command = "exec sh"
    try:
        # The stderr_after_stdout fault keeps the streams apart on v1 to send stderr last.
        late_stderr = not v2 and conn.device.faults.settings.stderr_after_stdout
        proc = conn.device.sandbox.popen(command, merge_stderr=not v2 and not late_stderr)
    except OSError as exc:
        msg = f"virtual device {conn.device.spec.name}: cannot start the sandbox shell: {exc}\n".encode()
        if v2:
            stream.write(_SHELL_PKT.pack(ID_STDERR, len(msg)) + msg + _SHELL_PKT.pack(ID_EXIT, 1) + bytes([127]))
        else:
            stream.write(msg)
        return
    wake_r, wake_w = os.pipe()
    stdin_thread = threading.Thread(target=_pump_stdin, args=(stream, proc, v2, wake_w), daemon=True,
                                    name="adbd-shell-stdin")
    stdin_thread.start()
    try:
        hung_up = _pump_output(stream, proc, v2, wake_r, late_stderr)
        if hung_up:
            _hang_up(proc)
            return
        rc = proc.wait()
        if v2:
            code = 128 - rc if rc < 0 else rc
            stream.write(_SHELL_PKT.pack(ID_EXIT, 1) + bytes([code & 0xFF]))
    finally:
        stream.close()  # lets the stdin thread finish before its wake-up pipe goes away
        stdin_thread.join(timeout=5)
        if not stdin_thread.is_alive():
            os.close(wake_r)
            os.close(wake_w)
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


def _pump_output(stream: _Stream, proc: subprocess.Popen, v2: bool, wake_r: int, late_stderr: bool = False) -> bool:
    """Copy stdout/stderr to the stream until both reach EOF. True if the client hung up.
    `late_stderr` (v1 only): hold stderr back and send it once both have ended."""
    sel = selectors.DefaultSelector()
    chunk = max(1024, stream.conn.max_out - _SHELL_PKT.size)
    ids = {}
    for f, pid in ((proc.stdout, ID_STDOUT), (proc.stderr, ID_STDERR)):
        if f is not None:
            sel.register(f.fileno(), selectors.EVENT_READ)
            ids[f.fileno()] = pid
    sel.register(wake_r, selectors.EVENT_READ)
    held = bytearray()
    try:
        while ids:
            for key, _ in sel.select():
                fd = key.fd
                if fd == wake_r:
                    return True
                data = os.read(fd, chunk)
                if not data:
                    sel.unregister(fd)
                    del ids[fd]
                    continue
                if late_stderr and ids[fd] == ID_STDERR:
                    held += data
                    continue
                packet = _SHELL_PKT.pack(ids[fd], len(data)) + data if v2 else data
                if not stream.write(packet):
                    return True
        return bool(held) and not stream.write(held)
    finally:
        sel.close()


def _pump_stdin(stream: _Stream, proc: subprocess.Popen, v2: bool, wake_w: int) -> None:
    stdin = proc.stdin
    assert stdin is not None
    try:
        while True:
            if v2:
                head = stream.read_exact(_SHELL_PKT.size)
                if head is None:
                    break
                pid, length = _SHELL_PKT.unpack(head)
                data = stream.read_exact(length) if length else b""
                if data is None:
                    break
                if pid == ID_STDIN and data:
                    _write_stdin(stdin, data)
                elif pid == ID_CLOSE_STDIN:
                    _close_quietly(stdin)
            else:
                piece = stream.read_chunk(1 << 20)
                if piece is None:
                    break
                _write_stdin(stdin, piece)
    finally:
        _close_quietly(stdin)
        if stream.remote_closed and not stream.local_closed:
            try:
                os.write(wake_w, b"x")  # the client went away: stop the output pump
            except OSError:
                pass


def _write_stdin(stdin, data: bytes | memoryview) -> None:
    try:
        stdin.write(data)
    except (BrokenPipeError, ValueError, OSError):
        pass  # the program closed its stdin or exited; a real shell drops the bytes too


def _close_quietly(f) -> None:
    try:
        f.close()
    except OSError:
        pass


def _hang_up(proc: subprocess.Popen) -> None:
    """The client closed the stream: SIGHUP the command's process group (nohup'ed children survive)."""
    try:
        os.killpg(proc.pid, signal.SIGHUP)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        try:
            proc.kill()
        except ProcessLookupError:
            pass
        proc.wait()


# ---- sync ---------------------------------------------------------------------------------
class _SyncFailed(Exception):
    """The sync session ends (after FAIL was sent, or the link went away)."""


def _serve_sync(conn: _Connection, stream: _Stream) -> None:
    sync = _SyncSession(conn, stream)
    try:
        while sync.handle_one():
            pass
    except _SyncFailed:
        pass


class _SyncSession:
    def __init__(self, conn: _Connection, stream: _Stream) -> None:
        self.conn = conn
        self.stream = stream
        self.device = conn.device
        self.sandbox = conn.device.sandbox

    # ---- framing ------------------------------------------------------------------------
    def _read(self, n: int) -> bytes:
        data = self.stream.read_exact(n)
        if data is None:
            raise _SyncFailed()
        return data

    def _reply(self, data: bytes) -> None:
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

    def _create(self, device_path: str, host, mode: int) -> int:
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
                err.mkdirs = True  # type: ignore[attr-defined]
                raise err
            try:
                os.mkdir(res.host, 0o775)
            except FileExistsError:
                pass
            except OSError as exc:
                exc.mkdirs = True  # type: ignore[attr-defined]
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
