"""The inventory's model: what devices.yaml describes once it is validated (harness/inventory/load.py
parses it): an Inventory of DeviceSpecs, each reached over adb (AdbServer), ssh (SshSpec) or
on this host, with its SoC and HTP facts; and TransportKind, the contract of a kind of device
link (its kinds: harness/inventory/kinds/, one file each, registered once)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from harness.errors import InventoryError
from harness.evidence import Clock, Tier
from harness.inventory.context import Ctx
from harness.inventory.labgrid import LabgridSpec

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
        where = self.transport.where(self)
        if not self.has_htp:
            return f"{self.name}: {where}, host (no HTP)"
        htp = "HTP emulator" if self.emulated else "HTP"  # emulator timings are not device speed
        return f"{self.name}: {where}, {self.soc_model} (soc_id {self.soc_id}, {htp} {self.htp_arch}, VTCM {self.vtcm_mb} MB)"


# A device's address for its transport (serial + adb server, or ssh); the other kinds' keys are refused.
Link = tuple[str | None, AdbServer | None, SshSpec | None]
YamlMap = dict[str, object]


class TransportKind(ABC):
    """One kind of device link: everything the harness knows of one way of reaching a device,
    on one object (the keys it owns and their validation, its descriptions, its labgrid resource,
    its driver). Subclasses set the class facts and write the four methods; an instance
    registers once (harness/inventory/kinds/registry.py), which checks it against this contract."""

    name: ClassVar[str]  # devices.yaml's `transport:` value; a record's transport
    keys: ClassVar[frozenset[str]] = frozenset()  # device keys this kind reads (others' keys are refused)
    needs_soc: ClassVar[bool] = True  # False: the host itself, which may leave `soc:` out (soc: host)
    default_work_dir: ClassVar[str | None] = None  # None: `work_dir:` is required
    on_host: ClassVar[bool] = False  # work_dir is a host folder (relative to the file), not an absolute device path
    # The labgrid resource a place publishes this kind's address with (docs/labgrid.md), and what
    # it is in words; None: labgrid places hold no device of this kind.
    labgrid_resource: ClassVar[str | None] = None
    labgrid_service: ClassVar[str] = ""
    needs_login: ClassVar[bool] = False  # its place must publish a login (`username:`) too
    # The driver that opens a device of this kind: "module:callable" taking (DeviceSpec,
    # RetryPolicy | None) and returning a Transport. Named, not imported: the drivers sit a floor
    # above the inventory (harness/transport opens it, tests/transport checks every kind's).
    opener: ClassVar[str]

    @abstractmethod
    def link(self, ctx: Ctx, raw: YamlMap, base: Path, labgrid: LabgridSpec | None) -> Link:
        """The device's address from its devices.yaml entry; a key of another kind is refused."""

    @abstractmethod
    def where(self, d: DeviceSpec) -> str:
        """How the device is reached, in words (DeviceSpec.describe)."""

    @abstractmethod
    def status_where(self, d: DeviceSpec) -> str:
        """The TRANSPORT column of `harness lab status` (short; a labgrid place names its resource)."""

    @abstractmethod
    def address(self, d: DeviceSpec) -> str:
        """The ADDRESS column of `harness devices`."""

    def from_place(self, d: DeviceSpec, host: str, port: int, user: str) -> DeviceSpec:
        """The device with the address its labgrid place publishes (kinds with a labgrid_resource)."""
        raise TypeError(f"transport kind {self.name} has no labgrid address")

    def __str__(self) -> str:
        return self.name

    def __copy__(self) -> TransportKind:
        return self  # one object per kind: DeviceSpecs compare kinds with `is`

    def __deepcopy__(self, memo: dict[int, object]) -> TransportKind:
        return self

    def __repr__(self) -> str:
        return f"<transport kind {self.name}>"


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

