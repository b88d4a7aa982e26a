"""A local TCP port forwarded through ssh (paramiko `direct-tcpip`), like `ssh -L`.

Used to reach a lab host's adb server that listens on that host's own loopback: nothing on
the lab network can talk to it, and the controller reaches it only as an ssh user whose host
key was checked (the same check as ssh boards, `harness.transport.ssh.connect_client`).
The local end binds 127.0.0.1 on a free port and takes any number of connections (the adb
client opens one per request); each becomes one ssh channel. A dropped ssh link is reopened
by the next connection; a connection that cannot be forwarded is closed at once, which the
adb client sees as a link fault (retryable).
"""

from __future__ import annotations

import select
import socket
import threading
from dataclasses import dataclass

import paramiko

from harness.errors import DeviceOfflineError
from harness.inventory import SshSpec
from harness.transport.ssh import connect_client

_BUF = 1 << 16


@dataclass(frozen=True)
class TunnelTarget:
    host: str  # as the ssh host resolves it (its own loopback for a lab host's adb server)
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class SshTunnel:
    """`with SshTunnel(spec, TunnelTarget("127.0.0.1", 5037), name=...) as t:` then connect
    to `t.local_address`."""

    def __init__(self, ssh: SshSpec, target: TunnelTarget, *, name: str, inventory: str,
                 section: str = "adb_server.via_ssh", connect_timeout: float = 15.0):
        self.ssh, self.target = ssh, target
        self.name, self.inventory, self.section = name, inventory, section
        self.connect_timeout = connect_timeout
        self.channels_opened = 0  # forwarded connections so far (diagnostics, tests)
        self.last_error = ""
        self._client: paramiko.SSHClient | None = None
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()  # guards the ssh client and the counters
        self._closing = threading.Event()
        self._pumps: set[tuple[socket.socket, paramiko.Channel]] = set()
        self._accept_thread: threading.Thread | None = None

    def __str__(self) -> str:
        return f"ssh tunnel to {self.target} via {self.ssh}"

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> SshTunnel:
        """Log in now (a bad host key or key fails here, with its own message), then listen."""
        self._ssh_transport()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        self._closing.clear()
        self._listener = listener
        self._accept_thread = threading.Thread(target=self._accept_loop, args=(listener,), daemon=True,
                                               name=f"tunnel-{self.name}")
        self._accept_thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._listener is not None and not self._closing.is_set()

    @property
    def local_address(self) -> tuple[str, int]:
        if self._listener is None:
            raise DeviceOfflineError(f"{self.name}: {self} is not open", device=self.name)
        host, port = self._listener.getsockname()[:2]
        return host, port

    def close(self) -> None:
        self._closing.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            pumps = list(self._pumps)
            client, self._client = self._client, None
        for sock, chan in pumps:
            _close_quietly(sock, chan)
        if client is not None:
            client.close()
        if self._accept_thread is not None:
            self._accept_thread.join(5)
            self._accept_thread = None

    def __enter__(self) -> SshTunnel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- forwarding ---------------------------------------------------------------------
    def _ssh_transport(self) -> paramiko.Transport:
        with self._lock:
            transport = self._client.get_transport() if self._client is not None else None
            if transport is not None and transport.is_active():
                return transport
            if self._client is not None:
                self._client.close()
                self._client = None
            client = connect_client(self.ssh, name=self.name, inventory=self.inventory,
                                    timeout=self.connect_timeout, section=self.section, role="lab host")
            self._client = client
            transport = client.get_transport()
            if transport is None:
                raise DeviceOfflineError(f"{self.name}: {self}: ssh login gave no transport", device=self.name)
            return transport

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._closing.is_set():
            try:
                sock, peer = listener.accept()
            except OSError:
                return  # the listener was closed
            threading.Thread(target=self._forward, args=(sock, peer), daemon=True,
                             name=f"tunnel-{self.name}-conn").start()

    def _open_channel(self, peer: tuple[str, int]) -> paramiko.Channel:
        """One channel; on a dead link, log in again once (the lab host may have rebooted)."""
        for attempt in (1, 2):
            transport = self._ssh_transport()
            try:
                return transport.open_channel("direct-tcpip", (self.target.host, self.target.port), peer,
                                              timeout=self.connect_timeout)
            except paramiko.ChannelException as exc:
                # The ssh server answered but refused: nothing listens at the target, or
                # forwarding is disabled (AllowTcpForwarding no) - not a link fault to retry.
                raise DeviceOfflineError(
                    f"{self.name}: the ssh host {self.ssh.host} cannot open {self.target} ({exc.text or exc}); "
                    f"check that the adb server runs there (`adb -P {self.target.port} start-server`) and that "
                    "its sshd allows TCP forwarding", device=self.name) from None
            except (OSError, EOFError, paramiko.SSHException):
                with self._lock:
                    if self._client is not None:
                        self._client.close()
                        self._client = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _forward(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        try:
            chan = self._open_channel(peer)
        except Exception as exc:  # any failure: refuse this one connection, say why once
            self.last_error = f"{type(exc).__name__}: {exc}"
            sock.close()
            return
        with self._lock:
            self.channels_opened += 1
            self._pumps.add((sock, chan))
        try:
            self._pump(sock, chan)
        finally:
            with self._lock:
                self._pumps.discard((sock, chan))
            _close_quietly(sock, chan)

    def _pump(self, sock: socket.socket, chan: paramiko.Channel) -> None:
        while not self._closing.is_set():
            try:
                waitables: list[socket.socket | paramiko.Channel] = [sock, chan]
                ready, _, _ = select.select(waitables, [], [], 1.0)
                if sock in ready:
                    data = sock.recv(_BUF)
                    if not data:
                        return
                    chan.sendall(data)
                if chan in ready:
                    data = chan.recv(_BUF)
                    if not data:
                        return
                    sock.sendall(data)
            except (OSError, EOFError, paramiko.SSHException, ValueError):
                return  # either end went away; closing both tells the other


def _close_quietly(sock: socket.socket, chan: paramiko.Channel) -> None:
    for thing in (chan, sock):
        try:
            thing.close()
        except Exception:  # already closed or the link is gone: nothing left to do
            pass
