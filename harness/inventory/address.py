"""The parts of a device's address in devices.yaml that its kinds read (harness/inventory/kinds/):
an adb server, an ssh target. With a labgrid place (harness/inventory/labgrid.py) the place
publishes the address, so it is not written here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.inventory.context import Ctx
from harness.inventory.model import DEFAULT_ADB_SERVER_PORT, AdbServer, SshSpec
from harness.validation import check_keys, parse_host_port, type_name, typed_get

_SSH_KEYS = {"host", "port", "user", "key", "known_hosts", "trust_new_host_key"}
_ADB_SERVER_KEYS = {"host", "port", "via_ssh"}


def parse_ssh(ctx: Ctx, data: Any, base: Path, *, prefix: str = "ssh", host_from: str | None = None) -> SshSpec:
    """`host_from`: where the host comes from instead (a labgrid place); then `host` and
    `port` must not be written here."""
    if not isinstance(data, dict):
        raise ctx.fail(prefix, f"must be a mapping, got {type_name(data)}",
                       f"give host, port, user, key and known_hosts under `{prefix}:`")
    check_keys(ctx, prefix, data, _SSH_KEYS)

    def want(key: str, kind: type, **kw: Any) -> Any:
        return typed_get(ctx, data, key, kind, label=f"{prefix}.{key}",
                         missing_fix=f"add `{key}:` under `{prefix}:`", **kw)

    if host_from is not None:
        for k in ("host", "port", "user"):
            if k in data:
                raise ctx.fail(f"{prefix}.{k}", f"is set although {host_from} gives the address",
                               f"remove `{k}:` (the labgrid place publishes it)")
        host, port, user = "", 22, ""
    else:
        host = want("host", str, required=True)
        port = want("port", int, default=22)
        user = want("user", str, default="root")
    if not 0 < port < 65536:
        raise ctx.fail(f"{prefix}.port", f"{port} is out of range", "use a TCP port between 1 and 65535")

    def path_of(key: str) -> Path | None:
        raw = want(key, str)
        if raw is None:
            return None
        p = Path(os.path.expanduser(raw))
        return p if p.is_absolute() else (base / p)

    return SshSpec(
        host=host, port=port, user=user,
        key=path_of("key"), known_hosts=path_of("known_hosts"),
        trust_new_host_key=want("trust_new_host_key", bool, default=False),
    )


def parse_adb_server(ctx: Ctx, raw: object, base: Path, *, from_place: bool) -> AdbServer | None:
    """`adb_server: "HOST:PORT"` or `{host, port, via_ssh: {...}}`. With a labgrid place the
    address comes from the place, so only `via_ssh` may be written here."""
    if raw is None:
        return None
    if isinstance(raw, str):
        if from_place:
            raise ctx.fail("adb_server", "is set although the labgrid place publishes the adb server",
                           "remove it (or keep only `adb_server: {via_ssh: ...}` to reach it through ssh)")
        return AdbServer(*parse_host_port(ctx, "adb_server", raw, DEFAULT_ADB_SERVER_PORT))
    if not isinstance(raw, dict):
        raise ctx.fail("adb_server", f"must be HOST:PORT or a mapping, got {type_name(raw)}",
                       "write `adb_server: 127.0.0.1:5037` or `adb_server: {host: ..., port: ..., via_ssh: {...}}`")
    check_keys(ctx, "adb_server", raw, _ADB_SERVER_KEYS)
    if from_place:
        for k in ("host", "port"):
            if k in raw:
                raise ctx.fail(f"adb_server.{k}", "is set although the labgrid place publishes the adb server",
                               f"remove `{k}:`; keep `via_ssh:` if the server is reached through ssh")
    host = typed_get(ctx, raw, "host", str, label="adb_server.host", default="127.0.0.1")
    port = typed_get(ctx, raw, "port", int, label="adb_server.port", default=DEFAULT_ADB_SERVER_PORT)
    if not 0 < port < 65536:
        raise ctx.fail("adb_server.port", f"{port} is out of range", "use a TCP port between 1 and 65535")
    via = None
    if raw.get("via_ssh") is not None:
        via = parse_ssh(ctx, raw["via_ssh"], base, prefix="adb_server.via_ssh")
    return AdbServer(host=host, port=port, via_ssh=via)
