"""`transport: adb`: a phone on an adb server (this host's, a lab host's, or one through ssh)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.inventory.address import parse_adb_server
from harness.inventory.context import Ctx, want
from harness.inventory.kinds.registry import KINDS
from harness.inventory.labgrid import LabgridSpec
from harness.inventory.model import AdbServer, DeviceSpec, Link, TransportKind, YamlMap


class Adb(TransportKind):
    name = "adb"
    keys = frozenset({"serial", "adb_server"})
    default_work_dir = "/data/local/tmp/harness"
    labgrid_resource = "ADBServer"
    labgrid_service = "adb server"
    opener = "harness.transport.factory:open_adb"

    def link(self, ctx: Ctx, raw: YamlMap, base: Path, labgrid: LabgridSpec | None) -> Link:
        given = want(ctx, raw, "serial", (str, int))
        serial = None if given is None else str(given)
        if not serial:
            raise ctx.fail("serial", "is missing for an adb device",
                           "add `serial:` (see `adb devices`; HOST:PORT for a TCP-attached device)")
        adb_server = parse_adb_server(ctx, raw.get("adb_server"), base, from_place=labgrid is not None)
        if "ssh" in raw:
            raise ctx.fail("ssh", "is set on an adb device", "remove it or set `transport: ssh`")
        return serial, adb_server, None

    def where(self, d: DeviceSpec) -> str:
        if d.labgrid is not None and d.adb_server is None:
            return f"adb {d.serial} via the adb server of {d.labgrid.describe()}"
        return f"adb {d.serial} via {d.adb_server or AdbServer()}"

    def status_where(self, d: DeviceSpec) -> str:
        if d.labgrid is not None:  # the address is the place's: name the resource that gives it
            return f"adb {d.serial} @ {d.labgrid.resource}"
        return f"adb {d.serial}" + (f" @ {d.adb_server}" if d.adb_server else "")

    def address(self, d: DeviceSpec) -> str:
        return f"{d.serial} @ {d.adb_server}" if d.adb_server else str(d.serial)

    def from_place(self, d: DeviceSpec, host: str, port: int, user: str) -> DeviceSpec:
        via = d.adb_server.via_ssh if d.adb_server is not None else None
        return dataclasses.replace(d, adb_server=AdbServer(host=host, port=port, via_ssh=via))


ADB = KINDS.register(Adb())
