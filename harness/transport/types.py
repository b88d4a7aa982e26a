"""What a device link answers, the same for every transport: a command's result (`CommandResult`,
and `RawExec`, a driver's primitive reply), a file's stat (`RemoteStat`) and a health check's
report (`HealthReport`, its `LinkState`)."""

from __future__ import annotations

import stat as stat_mod
from dataclasses import dataclass, field
from enum import StrEnum

from harness.errors import CommandFailed, DeviceUnauthorizedError, TransportError
from harness.transport.command import quote_argv
from harness.transport.facts import DeviceFacts


@dataclass(frozen=True)
class CommandResult:
    args: tuple[str, ...]
    stdout: str
    stderr: str
    exit_code: int
    duration_s: float = 0.0
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def signal(self) -> int | None:
        """Signal number when the shell reported 128+N (139 = SIGSEGV, 134 = SIGABRT)."""
        return self.exit_code - 128 if 128 < self.exit_code < 160 else None

    def check(self, device: str = "device") -> CommandResult:
        if not self.ok:
            tail = (self.stderr or self.stdout).strip().splitlines()[-3:]
            raise CommandFailed(f"{device}: `{quote_argv(self.args)}` exited {self.exit_code}: {' | '.join(tail)}",
                                device=device, argv=self.args, exit_code=self.exit_code, stdout=self.stdout,
                                stderr=self.stderr)
        return self


@dataclass(frozen=True)
class RawExec:
    """What a transport's primitive returns for one shell string."""

    stdout: bytes
    stderr: bytes
    exit_code: int
    timed_out: bool = False


@dataclass(frozen=True)
class RemoteStat:
    path: str
    size: int
    mode: int
    mtime: int
    inode: int = 0  # 0 when the link cannot tell (SFTP)

    @property
    def is_dir(self) -> bool:
        return stat_mod.S_ISDIR(self.mode)

    @property
    def is_file(self) -> bool:
        return stat_mod.S_ISREG(self.mode)


class LinkState(StrEnum):
    """What a health check found of a device's link: one spelling for every transport (the
    adb server's own states are mapped onto it in adb/state.py)."""

    UNKNOWN = "unknown"  # not checked
    OK = "ok"  # a shell answers
    UNREACHABLE = "unreachable"  # the link could not be opened, or broke while asked
    UNAUTHORIZED = "unauthorized"  # the device refuses this host (adb's RSA prompt, an ssh key)
    OFFLINE = "offline"  # the adb server lists it but it is not ready (offline, booting, authorizing)
    ABSENT = "absent"  # the adb server does not list it
    BROKEN = "broken"  # it answers, but not as a shell should (`echo ok`, df, the facts probe)


def link_state_of(exc: TransportError) -> LinkState:
    """The state a link fault leaves the link in, from its class."""
    return LinkState.UNAUTHORIZED if isinstance(exc, DeviceUnauthorizedError) else LinkState.UNREACHABLE


@dataclass
class HealthReport:
    device: str
    reachable: bool
    state: LinkState = LinkState.UNKNOWN
    facts: dict[str, str] = field(default_factory=dict)  # who the device is: Transport.facts()
    device_facts: DeviceFacts = field(default_factory=DeviceFacts)  # its condition: Transport.device_facts()
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.reachable and not self.problems


__all__ = ["CommandResult", "HealthReport", "LinkState", "RawExec", "RemoteStat", "link_state_of"]
