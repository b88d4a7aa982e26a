"""One transport connection from the adb server: the handshake (CNXN; AUTH only for the
`unauthorized` fault), OPEN/OKAY/WRTE/CLSE routed to streams, the drop and slow-link faults
on every WRTE payload. One thread reads the connection; each stream's service runs in its
own thread."""

from __future__ import annotations

import secrets
import socket
import threading
from typing import Protocol

from virtual_lab.adbd.contract import AdbdDevice
from virtual_lab.adbd.services import ServiceFn, route
from virtual_lab.adbd.stream import Stream
from virtual_lab.adbd.wire import (
    A_AUTH,
    A_CLSE,
    A_CNXN,
    A_OKAY,
    A_OPEN,
    A_VERSION,
    A_WRTE,
    AUTH_SIGNATURE,
    AUTH_TOKEN,
    FEATURES,
    HEADER,
    MAX_PAYLOAD,
    ConnectionGone,
    hard_close,
    sendall_vec,
)


class Owner(Protocol):
    """The server a connection belongs to."""

    @property
    def device(self) -> AdbdDevice: ...

    def service_started(self) -> None: ...

    def service_finished(self) -> None: ...

    def forget(self, conn: Connection) -> None: ...


class Connection:
    """One transport connection from the adb server."""

    def __init__(self, server: Owner, sock: socket.socket) -> None:
        self.server = server
        self.device = server.device
        self.sock = sock
        self.max_out = MAX_PAYLOAD
        self._send_lock = threading.Lock()
        self._streams: dict[int, Stream] = {}
        self._streams_lock = threading.Lock()
        self._next_id = 1
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"adbd-conn-{self.device.name}")
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
                raise ConnectionGone()
            self.device.throttle.consume(n)
        header = HEADER.pack(command, arg0, arg1, n, 0, command ^ 0xFFFFFFFF)
        with self._send_lock:
            try:
                if n:
                    sendall_vec(self.sock, header, payload)
                else:
                    self.sock.sendall(header)
            except OSError:
                raise ConnectionGone() from None

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
                raise ConnectionGone()
            got += k

    def _run(self) -> None:
        self.device.counters.add(connections=1)
        header = bytearray(HEADER.size)
        try:
            while True:
                self._recv_exact(header)
                command, arg0, arg1, length, _check, magic = HEADER.unpack(header)
                if magic != command ^ 0xFFFFFFFF or length > 4 * MAX_PAYLOAD:
                    return  # not adb: drop the link like adbd does
                payload = bytearray(length)
                if length:
                    self._recv_exact(payload)
                self._dispatch(command, arg0, arg1, payload)
        except (ConnectionGone, OSError):
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
                    raise ConnectionGone()
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
        handler = route(service)
        if handler is None:
            self.device.counters.bump("service_opens", "refused")
            self.send(A_CLSE, 0, remote_id)
            return
        kind, target = handler
        self.device.counters.bump("service_opens", kind)
        with self._streams_lock:
            local_id = self._next_id
            self._next_id += 1
            stream = Stream(self, local_id, remote_id)
            self._streams[local_id] = stream
        self.server.service_started()
        try:
            self.send(A_OKAY, local_id, remote_id)
            threading.Thread(target=self._serve, args=(target, stream), daemon=True,
                             name=f"adbd-{kind}-{self.device.name}").start()
        except BaseException:
            self.server.service_finished()
            raise

    def _serve(self, target: ServiceFn, stream: Stream) -> None:
        """A service's thread: run it, close its stream, publish the counters."""
        try:
            target(self.device, stream)
        except ConnectionGone:
            pass
        finally:
            try:
                stream.close()
                self.device.flush_counters()
            finally:
                self.server.service_finished()

    def _stream(self, local_id: int) -> Stream | None:
        with self._streams_lock:
            return self._streams.get(local_id)

    def _all_streams(self) -> list[Stream]:
        with self._streams_lock:
            return list(self._streams.values())

    def forget_stream(self, local_id: int) -> None:
        with self._streams_lock:
            self._streams.pop(local_id, None)

    def _teardown(self) -> None:
        for s in self._all_streams():
            s.on_remote_close()
        if self.aborted:
            hard_close(self.sock)
        else:
            self.sock.close()
        self.server.forget(self)
        self.device.flush_counters()
