"""Open the right transport for an inventory entry: the driver its kind names (TransportKind.opener)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from harness.inventory import DeviceSpec
from harness.transport.adb import AdbConnection, AdbTransport
from harness.transport.base import Transport
from harness.transport.retry import RetryPolicy

if TYPE_CHECKING:  # paramiko (the tunnel's) costs ~0.1 s of start-up: only when a tunnel is used
    from harness.transport.tunnel import SshTunnel


def open_transport(device: DeviceSpec, retry: RetryPolicy | None = None) -> Transport:
    opener = device.transport.opener
    module, _, name = opener.partition(":")
    try:
        make = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:  # a kind's own bug (exit 3): its contract test names it
        raise TypeError(f"transport kind {device.transport}: its opener {opener} is not there ({exc})") from exc
    made = make(device, retry)
    if not isinstance(made, Transport) or made.kind is not device.transport:
        raise TypeError(f"transport kind {device.transport}: its opener {opener} gave {made!r}, "
                         f"not a Transport of kind {device.transport}")
    return made


def open_adb(device: DeviceSpec, retry: RetryPolicy | None) -> Transport:
    server = device.adb_server
    if server is not None and server.via_ssh is not None:
        from harness.transport.tunnel import SshTunnel, TunnelTarget

        tunnel = SshTunnel(server.via_ssh, TunnelTarget(server.host, server.port), name=device.name,
                           inventory=str(device.source or "devices.yaml"))
        return AdbOverSsh(device, tunnel, retry=retry)
    return AdbTransport(device, retry=retry)


def open_ssh(device: DeviceSpec, retry: RetryPolicy | None) -> Transport:
    from harness.transport.ssh import SshTransport

    return SshTransport(device, retry=retry)


def open_local(device: DeviceSpec, retry: RetryPolicy | None) -> Transport:
    from harness.transport.local import LocalTransport

    return LocalTransport(device, retry=retry)


class AdbOverSsh(AdbTransport):
    """adb whose server connections go through an ssh tunnel to the lab host's adb server,
    which listens on that host's loopback only (harness/transport/tunnel.py)."""

    def __init__(self, device: DeviceSpec, tunnel: SshTunnel, retry: RetryPolicy | None = None):
        super().__init__(device, retry=retry)
        self.tunnel = tunnel

    def _may_start_server(self) -> bool:
        return False  # the server is the lab host's; never start one on this host

    def _may_restart_server(self) -> bool:
        return False

    def _server_conn(self, timeout: float | None = None) -> AdbConnection:
        if not self.tunnel.running:
            self.tunnel.start()  # opened on first use, and again if used after close()
        host, port = self.tunnel.local_address
        if (self.client.host, self.client.port) != (host, port):
            self.client = type(self.client)(host, port)
        return super()._server_conn(timeout)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.tunnel.close()
