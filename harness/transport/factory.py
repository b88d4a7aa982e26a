"""Open the right transport for an inventory entry."""

from __future__ import annotations

from harness.inventory import DeviceSpec
from harness.transport.base import Transport
from harness.transport.retry import RetryPolicy


def open_transport(device: DeviceSpec, retry: RetryPolicy | None = None) -> Transport:
    if device.transport == "adb":
        from harness.transport.adb import AdbTransport

        return AdbTransport(device, retry=retry)
    if device.transport == "ssh":
        from harness.transport.ssh import SshTransport

        return SshTransport(device, retry=retry)
    from harness.transport.local import LocalTransport

    return LocalTransport(device, retry=retry)
