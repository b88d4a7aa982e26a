"""The lab inventory (`devices.yaml`), read and validated: this package's one face. Outside code
imports its names from here, never from the modules beside it (load.py reads the file, model.py
is what it builds, address.py, soc.py and labgrid.py read a device's parts, context.py words
every error)."""

from __future__ import annotations

from harness.inventory.labgrid import LABGRID_DEFAULT_RESOURCE, LabgridSpec
from harness.inventory.load import load_inventory, parse_inventory
from harness.inventory.model import (
    DEFAULT_ADB_SERVER_PORT,
    HTP_EMULATOR,
    HTP_MODES,
    TRANSPORTS,
    WHERE,
    AdbServer,
    DeviceSpec,
    Inventory,
    SshSpec,
)

__all__ = ["DEFAULT_ADB_SERVER_PORT", "HTP_EMULATOR", "HTP_MODES", "LABGRID_DEFAULT_RESOURCE", "TRANSPORTS",
           "WHERE", "AdbServer", "DeviceSpec", "Inventory", "LabgridSpec", "SshSpec", "load_inventory",
           "parse_inventory"]
