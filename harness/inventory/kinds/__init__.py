"""The transport kinds (devices.yaml's `transport:`), one file each, registered once in KINDS on
import of this face; the contract they meet is harness/inventory/model.py's TransportKind. A
new kind is one file here (imported below) and its driver in harness/transport."""

from __future__ import annotations

from harness.inventory.kinds.adb import ADB
from harness.inventory.kinds.local import LOCAL
from harness.inventory.kinds.registry import KINDS, KindRegistry, check_contract
from harness.inventory.kinds.ssh import SSH

__all__ = ["ADB", "KINDS", "LOCAL", "SSH", "KindRegistry", "check_contract"]
