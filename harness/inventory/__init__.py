"""The lab inventory (`devices.yaml`), read and validated: this package's one face. Outside code
imports its names from here, never from the modules beside it (load.py reads the file, model.py
is what it builds and the contract of a transport kind, kinds/ the kinds (one file each, registered
once), address.py, soc.py and labgrid.py read a device's parts, context.py words every error)."""

from __future__ import annotations

from harness.inventory.context import Ctx, want
from harness.inventory.kinds import ADB, KINDS, LOCAL, SSH, KindRegistry, check_contract
from harness.inventory.labgrid import LabgridSpec
from harness.inventory.load import load_inventory, parse_inventory
from harness.inventory.model import (
    DEFAULT_ADB_SERVER_PORT,
    HTP_EMULATOR,
    HTP_MODES,
    AdbServer,
    DeviceSpec,
    Inventory,
    Link,
    SshSpec,
    TransportKind,
    YamlMap,
)

__all__ = ["ADB", "DEFAULT_ADB_SERVER_PORT", "Ctx", "HTP_EMULATOR", "HTP_MODES", "KINDS", "LOCAL", "SSH", "AdbServer",
           "DeviceSpec", "Inventory", "KindRegistry", "LabgridSpec", "Link", "SshSpec", "TransportKind", "YamlMap",
           "check_contract", "load_inventory", "parse_inventory", "want"]
