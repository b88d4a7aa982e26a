"""The adbd server: listens on host:port and serves adb connections for one device.

It also tracks the services in progress, so a caller can wait until the device has finished
reacting to what a client did (`wait_idle`)."""

from __future__ import annotations

import socket
import threading

from virtual_lab.adbd.connection import Connection
from virtual_lab.adbd.contract import AdbdDevice
from virtual_lab.adbd.wire import hard_close

SOCKET_BUFFER = 4 * 1024 * 1024


class AdbdServer:
    """Listens on host:port and serves adbd connections for one device."""

    def __init__(self, device: AdbdDevice, host: str = "127.0.0.1", port: int = 0) -> None:
        self.device = device
        self.host = host
        self._want_port = port
        self.port = 0
        self._sock: socket.socket | None = None
        self._stopped = threading.Event()
        self._conns: set[Connection] = set()
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
            raise OSError(exc.errno, f"virtual device {self.device.name!r}: cannot listen on "
                                     f"{self.host}:{self._want_port}: {exc.strerror}") from None
        sock.listen(16)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._stopped.clear()
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True,
                                               name=f"adbd-accept-{self.device.name}")
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

    def abort_connections(self) -> list[Connection]:
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

    def forget(self, conn: Connection) -> None:
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
                hard_close(client)
                self.device.flush_counters()  # another process may be watching counters.json
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                try:
                    client.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
                except OSError:
                    pass
            conn = Connection(self, client)
            with self._lock:
                self._conns.add(conn)
            conn.start()

