"""Device links behind one interface: `Transport` (base.py) with adb (the adb/ package, its own
face), ssh and local drivers; a consumer is typed on the narrow seam it uses (seams.py:
RunsCommands, MovesFiles, KillsProcesses, ReadsFacts).
This `__init__` is the package's one face; names load on first use (PEP 562), so importing one
name imports only its module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "adb": ("AdbConnection", "AdbError", "AdbFault", "AdbTransport", "SEND_PAYLOAD", "SyncClient", "is_tcp_serial",
            "link_state"),
    "base": ("Transport",),
    "command": ("build_shell_command", "check_wire_text", "env_prefix", "quote_argv"),
    "factory": ("AdbOverSsh", "open_adb", "open_local", "open_ssh", "open_transport"),
    "facts": ("SYSFS_BATTERY", "DeviceFacts", "ProbeUnreadable", "parse_df_free", "parse_dumpsys_battery",
              "parse_probe", "parse_sysfs_battery"),
    "local": ("LocalTransport",),
    "logcat": ("LogcatService",),
    "pidfiles": ("parse_stat_line",),
    "retry": ("NO_RETRY", "RetryPolicy"),
    "seams": ("HeldLink", "KillsProcesses", "MovesFiles", "MovesManyFiles", "OnDevice", "ReadsFacts", "RunsAndMovesFiles",
              "RunsCommands", "SyncsSets"),
    "ssh": ("SshTransport",),
    "types": ("CommandResult", "HealthReport", "LinkState", "RawExec", "RemoteStat", "link_state_of"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.transport.adb import SEND_PAYLOAD as SEND_PAYLOAD
    from harness.transport.adb import AdbConnection as AdbConnection
    from harness.transport.adb import AdbError as AdbError
    from harness.transport.adb import AdbFault as AdbFault
    from harness.transport.adb import AdbTransport as AdbTransport
    from harness.transport.adb import SyncClient as SyncClient
    from harness.transport.adb import is_tcp_serial as is_tcp_serial
    from harness.transport.adb import link_state as link_state
    from harness.transport.base import Transport as Transport
    from harness.transport.command import build_shell_command as build_shell_command
    from harness.transport.command import check_wire_text as check_wire_text
    from harness.transport.command import env_prefix as env_prefix
    from harness.transport.command import quote_argv as quote_argv
    from harness.transport.factory import AdbOverSsh as AdbOverSsh
    from harness.transport.factory import open_adb as open_adb
    from harness.transport.factory import open_local as open_local
    from harness.transport.factory import open_ssh as open_ssh
    from harness.transport.factory import open_transport as open_transport
    from harness.transport.facts import SYSFS_BATTERY as SYSFS_BATTERY
    from harness.transport.facts import DeviceFacts as DeviceFacts
    from harness.transport.facts import ProbeUnreadable as ProbeUnreadable
    from harness.transport.facts import parse_df_free as parse_df_free
    from harness.transport.facts import parse_dumpsys_battery as parse_dumpsys_battery
    from harness.transport.facts import parse_probe as parse_probe
    from harness.transport.facts import parse_sysfs_battery as parse_sysfs_battery
    from harness.transport.local import LocalTransport as LocalTransport
    from harness.transport.logcat import LogcatService as LogcatService
    from harness.transport.pidfiles import parse_stat_line as parse_stat_line
    from harness.transport.retry import NO_RETRY as NO_RETRY
    from harness.transport.retry import RetryPolicy as RetryPolicy
    from harness.transport.seams import HeldLink as HeldLink
    from harness.transport.seams import KillsProcesses as KillsProcesses
    from harness.transport.seams import MovesFiles as MovesFiles
    from harness.transport.seams import MovesManyFiles as MovesManyFiles
    from harness.transport.seams import OnDevice as OnDevice
    from harness.transport.seams import ReadsFacts as ReadsFacts
    from harness.transport.seams import RunsAndMovesFiles as RunsAndMovesFiles
    from harness.transport.seams import RunsCommands as RunsCommands
    from harness.transport.seams import SyncsSets as SyncsSets
    from harness.transport.ssh import SshTransport as SshTransport
    from harness.transport.types import CommandResult as CommandResult
    from harness.transport.types import HealthReport as HealthReport
    from harness.transport.types import LinkState as LinkState
    from harness.transport.types import RawExec as RawExec
    from harness.transport.types import RemoteStat as RemoteStat
    from harness.transport.types import link_state_of as link_state_of
