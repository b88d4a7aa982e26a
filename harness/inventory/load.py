"""The lab inventory (`devices.yaml`): a declarative list of devices, validated on load.

Every problem is reported as one InventoryError naming the file, the device and the key,
and saying what to do; callers never see a traceback for bad input.

This file reads the file and its devices; their parts live beside it: the model it builds
(model.py), a device's address (address.py), its SoC and HTP facts (soc.py), its `labgrid:`
place (labgrid.py) and the wording of every error (context.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from harness import soc
from harness.errors import InventoryError
from harness.inventory.context import Ctx, want
from harness.inventory.kinds import KINDS
from harness.inventory.labgrid import parse_labgrid, parse_top_labgrid
from harness.inventory.model import DeviceSpec, Inventory, Link, TransportKind
from harness.inventory.soc import parse_htp, soc_facts
from harness.validation import YamlBoundError, check_keys, load_yaml, no_gc_pauses, type_name, typed_get

# Every device's keys; each transport kind adds its own (TransportKind.keys).
_COMMON_KEYS = {"name", "transport", "soc", "soc_id", "htp_arch", "vtcm_mb", "work_dir", "tags", "description",
                "labgrid", "htp"}
_TOP_KEYS = {"version", "devices", "labgrid", "locks"}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _parse_device(ctx: Ctx, name: str, raw: dict[str, Any], base: Path, coordinator: str | None = None) -> DeviceSpec:
    check_keys(ctx, "", raw, _COMMON_KEYS | KINDS.device_keys())
    text = want(ctx, raw, "transport", str, required=True)
    rules = KINDS.named(text)
    if rules is None:
        raise ctx.fail("transport", f"{text!r} is not a transport", f"use one of {', '.join(KINDS.names())}")
    transport = rules
    labgrid = None if raw.get("labgrid") is None else parse_labgrid(ctx, raw["labgrid"], transport.name,
                                                                transport.labgrid_resource, coordinator)
    serial, adb_server, ssh_spec = rules.link(ctx, raw, base, labgrid)
    _refuse_others_keys(ctx, raw, rules)

    soc_model = want(ctx, raw, "soc", str, required=rules.needs_soc)
    if soc.is_host(soc_model):
        if "htp" in raw:
            raise ctx.fail("htp", "is set on the host (soc: host has no HTP to emulate)",
                           "give the SoC to emulate, e.g. `soc: SM8650` with `htp: emulator`, or remove `htp:`")
        return _host_device(ctx, raw, base, transport, (serial, adb_server, ssh_spec))
    htp = parse_htp(ctx, raw, transport, on_host=rules.on_host)
    soc_model, soc_id, arch, vtcm = soc_facts(ctx, raw, soc_model)

    default_dir = rules.default_work_dir
    work_dir = want(ctx, raw, "work_dir", str, required=default_dir is None, default=default_dir)
    if not rules.on_host and not PurePosixPath(work_dir).is_absolute():
        raise ctx.fail("work_dir", f"{work_dir!r} is not an absolute path",
                       "give the absolute folder on the device, e.g. /data/local/tmp/harness")
    if rules.on_host and not os.path.isabs(work_dir):
        work_dir = str((base / work_dir).resolve())
    tags = _tags(ctx, raw)
    description = want(ctx, raw, "description", str, default="")

    return DeviceSpec(
        name=name, transport=transport, soc_model=soc_model, soc_id=soc_id, htp_arch=arch, vtcm_mb=vtcm,
        work_dir=work_dir, serial=serial, adb_server=adb_server, ssh=ssh_spec, tags=tags,
        description=description, source=ctx.path, labgrid=labgrid, htp=htp,
    )


def _refuse_others_keys(ctx: Ctx, raw: Mapping[str, object], kind: TransportKind) -> None:
    """A key only other kinds read is refused (the built-in kinds word their own first)."""
    for key in sorted(set(raw) - _COMMON_KEYS - kind.keys):
        owners = " or ".join(f"`transport: {k.name}`" for k in KINDS.owners(key))
        raise ctx.fail(key, f"is set on a `transport: {kind.name}` device", f"remove it or set {owners}")


def _tags(ctx: Ctx, raw: Mapping[str, object]) -> tuple[str, ...]:
    tags = want(ctx, raw, "tags", list, default=[])
    for t in tags:
        if not isinstance(t, str) or not t:
            raise ctx.fail("tags", f"holds {t!r}", "tags must be non-empty strings")
    return tuple(tags)


def _host_device(ctx: Ctx, raw: Mapping[str, object], base: Path, transport: TransportKind, link: Link) -> DeviceSpec:
    """A local device that is the host: no SoC facts (QNN cells skip there)."""
    if not transport.on_host:
        raise ctx.fail("soc", "`host` is only for `transport: local`",
                       "give the device's Qualcomm SoC model, e.g. SM8750")
    for k in ("soc_id", "htp_arch", "vtcm_mb"):
        if k in raw:
            raise ctx.fail(k, "is set on the host (soc: host has no HTP)", f"remove `{k}:` or give a Qualcomm `soc:`")
    work_dir = want(ctx, raw, "work_dir", str, required=True)
    if not os.path.isabs(work_dir):
        work_dir = str((base / work_dir).resolve())
    return DeviceSpec(name=ctx.device or "", transport=transport, soc_model=soc.HOST, soc_id=0, htp_arch="",
                      vtcm_mb=0, work_dir=work_dir, serial=link[0], adb_server=link[1], ssh=link[2], tags=_tags(ctx, raw),
                      description=want(ctx, raw, "description", str, default=""), source=ctx.path)


def _parse_top_locks(top: Ctx, raw: object, base: Path) -> Path | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise top.fail("locks", f"must be a mapping, got {type_name(raw)}",
                       "write `locks: {dir: PATH}` (the claim folder every run on this lab shares)")
    check_keys(top, "locks", raw, {"dir"})
    text = typed_get(top, raw, "dir", str, label="locks.dir", required=True,
                     missing_fix="add `dir: PATH` under `locks:`")
    return (base / Path(text).expanduser()).resolve()


def parse_inventory(data: object, path: Path) -> Inventory:
    """Validate already-parsed YAML data (as loaded from `path`)."""
    top = Ctx(path)
    if not isinstance(data, dict):
        raise top.fail(None, f"the top level must be a mapping with `devices:`, got {type_name(data)}",
                       "start the file with `devices:` followed by a list of devices")
    check_keys(top, "", data, _TOP_KEYS)
    raw_devices = data.get("devices")
    if not isinstance(raw_devices, list) or not raw_devices:
        raise top.fail("devices", "must be a non-empty list", "list at least one device under `devices:`")
    base = path.parent
    coordinator = parse_top_labgrid(top, data.get("labgrid"))
    locks_dir = _parse_top_locks(top, data.get("locks"), base)
    devices: dict[str, DeviceSpec] = {}
    for i, raw in enumerate(raw_devices):
        if not isinstance(raw, dict):
            raise Ctx(path, f"#{i + 1}").fail(None, f"is a {type_name(raw)}, not a mapping",
                                              "write each device as `- name: ...` with its keys")
        name = raw.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            label = f"#{i + 1}"
            problem = "has no `name`" if name is None else f"has an invalid name {name!r}"
            raise Ctx(path, label).fail("name", problem,
                                        "give each device a name of letters, digits, '.', '_' or '-'")
        if name in devices:
            raise Ctx(path, name).fail("name", f"is a duplicate (device #{i + 1})",
                                       "give every device its own name")
        devices[name] = _parse_device(Ctx(path, name), name, raw, base, coordinator)
    return Inventory(path=path, devices=devices, labgrid_coordinator=coordinator,
                     locks_dir=locks_dir)


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(f"{p}: file not found; pass --devices-file with the path of your devices.yaml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"{p}: cannot read the file ({exc}); check its permissions and encoding (UTF-8)") from None
    try:
        data = load_yaml(text)  # libyaml's parser where PyYAML has it: ~6 ms of a `harness push` start-up less
    except YamlBoundError as exc:
        raise InventoryError(f"{p}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InventoryError(f"{p}: YAML syntax error{where}: {problem}; fix the YAML at that place") from None
    with no_gc_pauses():  # a DeviceSpec and its parts per device, as many objects as the file's (validation.py)
        return parse_inventory(data, p)

