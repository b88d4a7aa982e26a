"""`transport: local`: this host as a device (host builds of the runtimes, the HTP emulator)."""

from __future__ import annotations

from pathlib import Path

from harness.inventory.context import Ctx, want
from harness.inventory.kinds.registry import KINDS
from harness.inventory.labgrid import LabgridSpec
from harness.inventory.model import DeviceSpec, Link, TransportKind, YamlMap


class Local(TransportKind):
    name = "local"
    needs_soc = False
    on_host = True
    opener = "harness.transport.factory:open_local"

    def link(self, ctx: Ctx, raw: YamlMap, base: Path, labgrid: LabgridSpec | None) -> Link:
        want(ctx, raw, "serial", (str, int))
        for k in ("serial", "adb_server", "ssh"):
            if k in raw:
                raise ctx.fail(k, "is set on a local device", "remove it; a local device is this host")
        return None, None, None

    def where(self, d: DeviceSpec) -> str:
        return "local host"

    def status_where(self, d: DeviceSpec) -> str:
        return "local"

    def address(self, d: DeviceSpec) -> str:
        return "HTP emulator" if d.emulated else "-"  # this host; emulator times


LOCAL = KINDS.register(Local())
