"""The adb driver, one face for it: `AdbTransport` (transport.py: the device link, shell and
facts) with its file half (files.py), over our own adb host-protocol and sync clients (host.py,
sync.py); shell v2 / v1-marker exec read off a device stream (shell.py); serials, server states
and their errors (state.py); getprop (props.py). Names load on first use (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "host": ("AdbConnection", "AdbError", "AdbFault"),
    "state": ("is_tcp_serial", "link_state"),
    "sync": ("SEND_PAYLOAD", "SyncClient"),
    "transport": ("AdbTransport",),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.transport.adb.host import AdbConnection as AdbConnection
    from harness.transport.adb.host import AdbError as AdbError
    from harness.transport.adb.host import AdbFault as AdbFault
    from harness.transport.adb.state import is_tcp_serial as is_tcp_serial
    from harness.transport.adb.state import link_state as link_state
    from harness.transport.adb.sync import SEND_PAYLOAD as SEND_PAYLOAD
    from harness.transport.adb.sync import SyncClient as SyncClient
    from harness.transport.adb.transport import AdbTransport as AdbTransport
