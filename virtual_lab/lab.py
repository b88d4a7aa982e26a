"""A whole virtual lab: real adb server(s), emulated adbd devices, a real sshd board, and
the devices.yaml that points the harness at them. Everything binds 127.0.0.1 free ports.

    with VirtualLab(tmp_path) as lab:
        inventory = lab.inventory          # harness sees ordinary adb/ssh devices
        lab.adb_device("oneplus13").faults.offline_for(3)
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from virtual_lab.adb_server import AdbServer
from virtual_lab.device import VirtualDevice, VirtualDeviceSpec
from virtual_lab.sshd import VirtualSshBoard

DEVICE_WORK_DIR = "/data/local/tmp/harness"


@dataclass(frozen=True)
class LabDeviceConfig:
    name: str
    transport: str = "adb"  # adb | ssh
    soc: str = "SM8750"
    htp_arch: str = "v79"
    model: str = "CPH2653"
    product: str = "sun"
    device: str = "OP5D0DL1"
    manufacturer: str = "OnePlus"
    adb_server: int = 0  # index of the adb server (lab host) the device hangs off
    disk_capacity_bytes: int | None = None
    tags: tuple[str, ...] = ()
    props: dict[str, str] = field(default_factory=dict)


def default_devices() -> list[LabDeviceConfig]:
    return [
        LabDeviceConfig("oneplus13", soc="SM8750", htp_arch="v79", model="CPH2653", product="sun",
                        device="OP5D0DL1", tags=("phone", "v79")),
        LabDeviceConfig("sm8650-qrd", soc="SM8650", htp_arch="v75", model="SM8650-QRD", product="pineapple",
                        device="pineapple", manufacturer="QTI", tags=("board", "v75")),
        LabDeviceConfig("sa8295-car", transport="ssh", soc="SA8295", htp_arch="v68", tags=("car", "v68")),
    ]


class VirtualLab:
    def __init__(self, root: Path | None = None, devices: Sequence[LabDeviceConfig] | None = None):
        self._own_root = root is None
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="vlab-"))
        self.root = self.root.resolve()
        self.configs = list(devices) if devices is not None else default_devices()
        names = [c.name for c in self.configs]
        if len(set(names)) != len(names):
            raise ValueError(f"virtual lab: duplicate device names in {names}")
        self.adb_servers: list[AdbServer] = []
        self._adb: dict[str, VirtualDevice] = {}
        self._ssh: dict[str, VirtualSshBoard] = {}
        self._inventory: Any = None
        self.devices_yaml = self.root / "devices.yaml"

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> VirtualLab:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        n_servers = 1 + max((c.adb_server for c in self.configs if c.transport == "adb"), default=-1)
        for i in range(n_servers):
            home = self.root / f"adb-home-{i}"
            home.mkdir(parents=True, exist_ok=True)
            server = AdbServer(home=home)
            server.start()
            self.adb_servers.append(server)
        for cfg in self.configs:
            if cfg.transport == "adb":
                spec_kwargs: dict[str, Any] = dict(
                    name=cfg.name, product=cfg.product, model=cfg.model, device=cfg.device,
                    manufacturer=cfg.manufacturer, soc_model=cfg.soc, htp_arch=cfg.htp_arch, props=cfg.props)
                if cfg.disk_capacity_bytes:
                    spec_kwargs["disk_capacity_bytes"] = cfg.disk_capacity_bytes
                dev = VirtualDevice(VirtualDeviceSpec(**spec_kwargs), self.root / "devices" / cfg.name).start()
                self._adb[cfg.name] = dev
                self.adb_servers[cfg.adb_server].attach(dev.serial)
            elif cfg.transport == "ssh":
                board = VirtualSshBoard(self.root / "boards" / cfg.name, soc_model=cfg.soc, htp_arch=cfg.htp_arch)
                board.start()
                self._ssh[cfg.name] = board
            else:
                raise ValueError(f"virtual lab device {cfg.name!r}: transport {cfg.transport!r} is not adb or ssh")
        self.write_devices_yaml(self.devices_yaml)

    def stop(self) -> None:
        for board in self._ssh.values():
            board.stop()
        for dev in self._adb.values():
            dev.stop()
        for server in self.adb_servers:
            server.stop()
        self._ssh.clear()
        self._adb.clear()
        self.adb_servers.clear()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> VirtualLab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- what the harness sees ----------------------------------------------------------
    def inventory_entries(self) -> list[dict[str, Any]]:
        entries = []
        for cfg in self.configs:
            if cfg.transport == "adb":
                dev = self._adb[cfg.name]
                server = self.adb_servers[cfg.adb_server]
                entries.append({"name": cfg.name, "transport": "adb", "serial": dev.serial,
                                "adb_server": f"127.0.0.1:{server.port}", "soc": cfg.soc,
                                "work_dir": DEVICE_WORK_DIR, "tags": [*cfg.tags, "virtual"]})
            else:
                entry = self._ssh[cfg.name].inventory_entry(cfg.name, soc=cfg.soc)
                entry["tags"] = [*cfg.tags, "virtual"]
                entries.append(entry)
        return entries

    def write_devices_yaml(self, path: Path) -> Path:
        header = "# Written by virtual_lab: devices of a running virtual lab (127.0.0.1 only).\n"
        path.write_text(header + yaml.safe_dump({"devices": self.inventory_entries()}, sort_keys=False))
        self._inventory = None
        return path

    @property
    def inventory(self):
        if self._inventory is None:
            from harness.inventory import load_inventory  # virtual_lab may use harness; never the reverse

            self._inventory = load_inventory(self.devices_yaml)
        return self._inventory

    def adb_device(self, name: str) -> VirtualDevice:
        try:
            return self._adb[name]
        except KeyError:
            raise KeyError(f"virtual lab has no adb device {name!r}; adb devices: {sorted(self._adb)}") from None

    def ssh_board(self, name: str) -> VirtualSshBoard:
        try:
            return self._ssh[name]
        except KeyError:
            raise KeyError(f"virtual lab has no ssh board {name!r}; boards: {sorted(self._ssh)}") from None

    def adb_server_for(self, name: str) -> AdbServer:
        cfg = next(c for c in self.configs if c.name == name)
        return self.adb_servers[cfg.adb_server]

    def runtime_dir(self, arch: str, kind: str = "mnn") -> Path:
        """A runner + libraries folder for the virtual devices (built once per arch and kind)."""
        from virtual_lab.runtime import make_runtime_dir

        dst = self.root / "runtimes" / f"{kind}-{arch}"
        if not dst.exists():
            make_runtime_dir(dst, arch, kind=kind)
        return dst

    @property
    def qnn_sdk_dir(self) -> Path:
        from virtual_lab.runtime import make_qnn_sdk

        dst = self.root / "qnn-sdk"
        if not dst.exists():
            make_qnn_sdk(dst)
        return dst
