"""`transport: ssh`: a Linux board (an automotive SoC) reached over ssh and SFTP."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.inventory.address import parse_ssh
from harness.inventory.context import Ctx, want
from harness.inventory.kinds.registry import KINDS
from harness.inventory.labgrid import LabgridSpec
from harness.inventory.model import DeviceSpec, Link, TransportKind, YamlMap


class Ssh(TransportKind):
    name = "ssh"
    keys = frozenset({"ssh"})
    labgrid_resource = "NetworkService"
    labgrid_service = "ssh service"
    needs_login = True
    opener = "harness.transport.factory:open_ssh"

    def link(self, ctx: Ctx, raw: YamlMap, base: Path, labgrid: LabgridSpec | None) -> Link:
        want(ctx, raw, "serial", (str, int))  # a wrong type is named before the key is refused
        if "ssh" not in raw:
            raise ctx.fail("ssh", "is missing for an ssh device", "add `ssh: {host: ..., user: ..., key: ...}`")
        ssh_spec = parse_ssh(ctx, raw["ssh"], base, host_from=None if labgrid is None else labgrid.describe())
        for k in ("serial", "adb_server"):
            if k in raw:
                raise ctx.fail(k, "is set on an ssh device", "remove it or set `transport: adb`")
        return None, None, ssh_spec

    def where(self, d: DeviceSpec) -> str:
        if d.labgrid is not None and d.ssh is not None and not d.ssh.host:
            return f"ssh via {d.labgrid.describe()}"
        return f"ssh {d.ssh}" if d.ssh else "ssh"

    def status_where(self, d: DeviceSpec) -> str:
        if d.labgrid is not None:
            return f"ssh @ {d.labgrid.resource}"
        return f"ssh {d.ssh.host}:{d.ssh.port}" if d.ssh else "ssh"

    def address(self, d: DeviceSpec) -> str:
        return f"{d.ssh.user}@{d.ssh.host}:{d.ssh.port}" if d.ssh else "-"

    def from_place(self, d: DeviceSpec, host: str, port: int, user: str) -> DeviceSpec:
        assert d.ssh is not None  # an ssh device's entry always has `ssh:` (its key and known_hosts)
        return dataclasses.replace(d, ssh=dataclasses.replace(d.ssh, host=host, port=port, user=user))


SSH = KINDS.register(Ssh())
