"""The inventory's model: what devices.yaml describes once it is validated (harness/inventory/load.py
parses it): an Inventory of DeviceSpecs, each reached over adb (AdbServer), ssh (SshSpec) or
on this host, with its SoC and HTP facts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import InventoryError
from harness.evidence import Clock, Tier
from harness.inventory.labgrid import LabgridSpec
from harness.kinds import TransportKind, by_kind

TRANSPORTS = tuple(k.value for k in TransportKind)
DEFAULT_ADB_SERVER_PORT = 5037
# `htp: emulator`: a local device whose QNN cells run on the host's x86 HTP emulator for its SoC
# (QAIRT's libQnnHtp.so from the `qnn` extra; docs/executorch-runner.md#the-htp-emulator).
HTP_EMULATOR = "emulator"
HTP_MODES = (HTP_EMULATOR,)


@dataclass(frozen=True)
class SshSpec:
    host: str
    port: int = 22
    user: str = "root"
    key: Path | None = None
    known_hosts: Path | None = None
    # Trusting an unknown host key is an explicit opt-in; the default rejects it.
    trust_new_host_key: bool = False

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class AdbServer:
    """A (lab host's) adb server. With `via_ssh`, host:port is where the server listens as
    seen from that ssh host (normally its own loopback), reached through an ssh tunnel."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_ADB_SERVER_PORT
    via_ssh: SshSpec | None = None

    def __str__(self) -> str:
        return f"{self.host}:{self.port}" + (f" via ssh {self.via_ssh}" if self.via_ssh else "")


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    transport: TransportKind
    soc_model: str
    soc_id: int
    htp_arch: str
    vtcm_mb: int
    work_dir: str
    serial: str | None = None
    adb_server: AdbServer | None = None
    ssh: SshSpec | None = None
    tags: tuple[str, ...] = ()
    description: str = ""
    source: Path | None = None
    labgrid: LabgridSpec | None = None
    htp: str = ""  # "emulator": the HTP is the host's QAIRT emulator (a local device), "" a real one

    @property
    def emulated(self) -> bool:
        """True when this device's HTP is the host's emulator: its times are not device speed."""
        return self.htp == HTP_EMULATOR

    @property
    def timing(self) -> Clock:
        """What a time measured on this device means: on the emulator or the device (records, JUnit, report)."""
        return Clock.EMULATOR if self.emulated else Clock.DEVICE

    @property
    def tier(self) -> Tier:
        """Where a verdict on this device ran: its NPU, the host's HTP emulator, or a CPU (no HTP)."""
        if not self.has_htp:
            return Tier.CPU
        return Tier.EMULATOR if self.emulated else Tier.NPU

    @property
    def arch_number(self) -> int:
        return int(self.htp_arch[1:]) if self.htp_arch else 0

    @property
    def has_htp(self) -> bool:
        """False for the host (`soc: host`): no QNN/HTP backend can run there."""
        return bool(self.htp_arch)

    def describe(self) -> str:
        where = WHERE[self.transport](self)
        if not self.has_htp:
            return f"{self.name}: {where}, host (no HTP)"
        htp = "HTP emulator" if self.emulated else "HTP"  # emulator timings are not device speed
        return f"{self.name}: {where}, {self.soc_model} (soc_id {self.soc_id}, {htp} {self.htp_arch}, VTCM {self.vtcm_mb} MB)"


def _adb_where(d: DeviceSpec) -> str:
    if d.labgrid is not None and d.adb_server is None:
        return f"adb {d.serial} via the adb server of {d.labgrid.describe()}"
    return f"adb {d.serial} via {d.adb_server or AdbServer()}"


def _ssh_where(d: DeviceSpec) -> str:
    if d.labgrid is not None and d.ssh is not None and not d.ssh.host:
        return f"ssh via {d.labgrid.describe()}"
    return f"ssh {d.ssh}" if d.ssh else "ssh"


# Where a device is reached, in words (DeviceSpec.describe).
WHERE: Mapping[TransportKind, Callable[[DeviceSpec], str]] = by_kind("inventory.WHERE", {
    TransportKind.ADB: _adb_where, TransportKind.SSH: _ssh_where, TransportKind.LOCAL: lambda d: "local host"})


@dataclass(frozen=True)
class Inventory:
    path: Path
    devices: dict[str, DeviceSpec] = field(default_factory=dict)
    labgrid_coordinator: str | None = None  # top-level `labgrid: {coordinator: HOST:PORT}`
    # top-level `locks: {dir: PATH}`: the lab's claim folder for every run that reads this file
    # (nights, pushes, pytest sessions); relative to the file. None: `locks/` beside it.
    locks_dir: Path | None = None

    def get(self, name: str) -> DeviceSpec:
        try:
            return self.devices[name]
        except KeyError:
            known = ", ".join(sorted(self.devices)) or "none"
            raise InventoryError(
                f"{self.path}: no device named {name!r} (devices in this file: {known}); "
                "pick one of them or add it to the file"
            ) from None

    def select(self, names: Iterable[str] | None = None, tags: Iterable[str] | None = None) -> list[DeviceSpec]:
        """Devices matching any of `names` and carrying all of `tags` (None: no filter)."""
        chosen = list(self.devices.values())
        if names:
            wanted = list(names)
            for n in wanted:
                self.get(n)  # unknown names are an error, not silently dropped
            chosen = [d for d in chosen if d.name in wanted]
        if tags:
            need = set(tags)
            chosen = [d for d in chosen if need <= set(d.tags)]
        return chosen

