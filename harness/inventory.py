"""The lab inventory (`devices.yaml`): a declarative list of devices, validated on load.

Every problem is reported as one InventoryError naming the file, the device and the key,
and saying what to do; callers never see a traceback for bad input.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from harness import soc
from harness.errors import InventoryError
from harness.inventory_labgrid import LABGRID_DEFAULT_RESOURCE, LabgridSpec, parse_labgrid, parse_top_labgrid
from harness.kinds import TransportKind, by_kind
from harness.validation import check_keys, parse_host_port, type_name, typed_get

TRANSPORTS = tuple(k.value for k in TransportKind)
DEFAULT_ADB_SERVER_PORT = 5037

_DEVICE_KEYS = {
    "name", "transport", "serial", "adb_server", "ssh", "soc", "soc_id", "htp_arch",
    "vtcm_mb", "work_dir", "tags", "description", "labgrid", "htp",
}
# `htp: emulator`: a local device whose QNN cells run on the host's x86 HTP emulator for its SoC
# (QAIRT's libQnnHtp.so from the `qnn` extra; docs/executorch-runner.md#the-htp-emulator).
HTP_EMULATOR = "emulator"
HTP_MODES = (HTP_EMULATOR,)
_SSH_KEYS = {"host", "port", "user", "key", "known_hosts", "trust_new_host_key"}
_ADB_SERVER_KEYS = {"host", "port", "via_ssh"}
_TOP_KEYS = {"version", "devices", "labgrid", "locks"}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


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
    def timing(self) -> str:
        """What a time measured on this device means: "emulator" or "device" (records, JUnit, report)."""
        return "emulator" if self.emulated else "device"

    @property
    def arch_number(self) -> int:
        return int(self.htp_arch[1:]) if self.htp_arch else 0

    @property
    def has_htp(self) -> bool:
        """False for the host (`soc: host`): no QNN/HTP backend can run there."""
        return bool(self.htp_arch)

    def describe(self) -> str:
        where = WHERE[self.transport](self)
        if not self.has_htp:
            return f"{self.name}: {where}, host (no HTP)"
        htp = "HTP emulator" if self.emulated else "HTP"  # emulator timings are not device speed
        return f"{self.name}: {where}, {self.soc_model} (soc_id {self.soc_id}, {htp} {self.htp_arch}, VTCM {self.vtcm_mb} MB)"


def _adb_where(d: DeviceSpec) -> str:
    if d.labgrid is not None and d.adb_server is None:
        return f"adb {d.serial} via the adb server of {d.labgrid.describe()}"
    return f"adb {d.serial} via {d.adb_server or AdbServer()}"


def _ssh_where(d: DeviceSpec) -> str:
    if d.labgrid is not None and d.ssh is not None and not d.ssh.host:
        return f"ssh via {d.labgrid.describe()}"
    return f"ssh {d.ssh}" if d.ssh else "ssh"


# Where a device is reached, in words (DeviceSpec.describe).
WHERE: Mapping[TransportKind, Callable[[DeviceSpec], str]] = by_kind("inventory.WHERE", {
    TransportKind.ADB: _adb_where, TransportKind.SSH: _ssh_where, TransportKind.LOCAL: lambda d: "local host"})


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


class _Ctx:
    """Builds messages that always say file, device and key."""

    def __init__(self, path: Path, device: str | None = None):
        self.path, self.device = path, device

    def fail(self, key: str | None, problem: str, fix: str) -> InventoryError:
        where = str(self.path)
        if self.device is not None:
            where += f": device {self.device!r}"
        if key:
            where += f", key {key!r}"
        return InventoryError(f"{where}: {problem}; {fix}")


def _want(ctx: _Ctx, data: dict, key: str, kind: type | tuple[type, ...], *, required: bool = False,
          default: Any = None) -> Any:
    return typed_get(ctx, data, key, kind, default=default, required=required,
                     missing_fix=f"add `{key}:` to this device")


def _parse_ssh(ctx: _Ctx, data: Any, base: Path, *, prefix: str = "ssh", host_from: str | None = None) -> SshSpec:
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


def _parse_adb_server(ctx: _Ctx, raw: Any, base: Path, *, from_place: bool) -> AdbServer | None:
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
        via = _parse_ssh(ctx, raw["via_ssh"], base, prefix="adb_server.via_ssh")
    return AdbServer(host=host, port=port, via_ssh=via)


def _parse_device(ctx: _Ctx, name: str, raw: dict, base: Path, coordinator: str | None = None) -> DeviceSpec:
    check_keys(ctx, "", raw, _DEVICE_KEYS)
    text = _want(ctx, raw, "transport", str, required=True)
    if text not in TRANSPORTS:
        raise ctx.fail("transport", f"{text!r} is not a transport", f"use one of {', '.join(TRANSPORTS)}")
    transport = TransportKind(text)
    rules = _RULES[transport]
    labgrid = None if raw.get("labgrid") is None else parse_labgrid(ctx, raw["labgrid"], transport, coordinator)
    serial, adb_server, ssh_spec = rules.link(ctx, raw, base, labgrid)

    soc_model = _want(ctx, raw, "soc", str, required=rules.needs_soc)
    if soc.is_host(soc_model):
        if "htp" in raw:
            raise ctx.fail("htp", "is set on the host (soc: host has no HTP to emulate)",
                           "give the SoC to emulate, e.g. `soc: SM8650` with `htp: emulator`, or remove `htp:`")
        return _host_device(ctx, raw, base, transport)
    htp = _parse_htp(ctx, raw, transport)
    soc_model, soc_id, arch, vtcm = _soc_facts(ctx, raw, soc_model)

    default_dir = rules.default_work_dir
    work_dir = _want(ctx, raw, "work_dir", str, required=default_dir is None, default=default_dir)
    if not rules.on_host and not PurePosixPath(work_dir).is_absolute():
        raise ctx.fail("work_dir", f"{work_dir!r} is not an absolute path",
                       "give the absolute folder on the device, e.g. /data/local/tmp/harness")
    if rules.on_host and not os.path.isabs(work_dir):
        work_dir = str((base / work_dir).resolve())
    tags = _tags(ctx, raw)
    description = _want(ctx, raw, "description", str, default="")

    return DeviceSpec(
        name=name, transport=transport, soc_model=soc_model, soc_id=soc_id, htp_arch=arch, vtcm_mb=vtcm,
        work_dir=work_dir, serial=serial, adb_server=adb_server, ssh=ssh_spec, tags=tags,
        description=description, source=ctx.path, labgrid=labgrid, htp=htp,
    )


def _parse_htp(ctx: _Ctx, raw: dict, transport: TransportKind) -> str:
    """`htp: emulator` only on a device that is this host; such a device with an HTP SoC needs
    it (this host has no Hexagon DSP: its QNN cells can only run on QAIRT's x86 emulator)."""
    on_host = _RULES[transport].on_host
    htp = _want(ctx, raw, "htp", str)
    if htp is None:
        if on_host:
            raise ctx.fail("soc", f"{raw.get('soc')!r} on a local device: this host has no Hexagon HTP",
                           "add `htp: emulator` to run its QNN cells on the host's QAIRT HTP emulator "
                           "(pip install 'harness[qnn]'), or use `soc: host` for the CPU only")
        return ""
    if htp not in HTP_MODES:
        raise ctx.fail("htp", f"{htp!r} is not an HTP mode", f"use `htp: {HTP_EMULATOR}` (the only one)")
    if not on_host:
        raise ctx.fail("htp", f"`htp: {htp}` is set on a {transport} device",
                       "remove it: an adb or ssh device runs its own HTP; the emulator is for `transport: local`")
    return htp


# A device's address for its transport (serial + adb server, or ssh); the other transports' keys are refused.
Link = tuple[str | None, AdbServer | None, SshSpec | None]


def _adb_link(ctx: _Ctx, raw: dict, base: Path, labgrid: LabgridSpec | None) -> Link:
    given = _want(ctx, raw, "serial", (str, int))
    serial = None if given is None else str(given)
    if not serial:
        raise ctx.fail("serial", "is missing for an adb device",
                       "add `serial:` (see `adb devices`; HOST:PORT for a TCP-attached device)")
    adb_server = _parse_adb_server(ctx, raw.get("adb_server"), base, from_place=labgrid is not None)
    if "ssh" in raw:
        raise ctx.fail("ssh", "is set on an adb device", "remove it or set `transport: ssh`")
    return serial, adb_server, None


def _ssh_link(ctx: _Ctx, raw: dict, base: Path, labgrid: LabgridSpec | None) -> Link:
    _want(ctx, raw, "serial", (str, int))  # a wrong type is named before the key is refused
    if "ssh" not in raw:
        raise ctx.fail("ssh", "is missing for an ssh device", "add `ssh: {host: ..., user: ..., key: ...}`")
    ssh_spec = _parse_ssh(ctx, raw["ssh"], base, host_from=None if labgrid is None else labgrid.describe())
    for k in ("serial", "adb_server"):
        if k in raw:
            raise ctx.fail(k, "is set on an ssh device", "remove it or set `transport: adb`")
    return None, None, ssh_spec


def _local_link(ctx: _Ctx, raw: dict, base: Path, labgrid: LabgridSpec | None) -> Link:
    _want(ctx, raw, "serial", (str, int))
    for k in ("serial", "adb_server", "ssh"):
        if k in raw:
            raise ctx.fail(k, "is set on a local device", "remove it; a local device is this host")
    return None, None, None


@dataclass(frozen=True)
class _KindRules:
    """What devices.yaml asks of a device of one transport kind."""

    link: Callable[[_Ctx, dict, Path, LabgridSpec | None], Link]
    needs_soc: bool  # False: the host itself, which may leave `soc:` out (soc: host)
    default_work_dir: str | None  # None: `work_dir:` is required
    on_host: bool  # work_dir is a host folder (relative to the file), not an absolute device path


_RULES = by_kind("inventory._RULES", {
    TransportKind.ADB: _KindRules(_adb_link, True, "/data/local/tmp/harness", False),
    TransportKind.SSH: _KindRules(_ssh_link, True, None, False),
    TransportKind.LOCAL: _KindRules(_local_link, False, None, True),
})


def _soc_facts(ctx: _Ctx, raw: dict, soc_model: str) -> tuple[str, int, str, int]:
    """(model, soc_id, HTP arch, VTCM MB): from the SoC table, where a written fact must agree
    with it, or all written out for an SoC the table lacks."""
    info = soc.lookup(soc_model)
    soc_id = _want(ctx, raw, "soc_id", int)
    arch_raw = _want(ctx, raw, "htp_arch", (str, int))
    vtcm = _want(ctx, raw, "vtcm_mb", int)
    arch = None
    if arch_raw is not None:
        arch = soc.normalize_arch(arch_raw)
        if arch is None:
            raise ctx.fail("htp_arch", f"{arch_raw!r} is not an HTP arch",
                           f"use one of {', '.join(soc.HTP_ARCHES)}")
    if info is None:
        # An SoC outside the table is allowed when the facts are spelled out.
        missing = [k for k, v in (("soc_id", soc_id), ("htp_arch", arch), ("vtcm_mb", vtcm)) if v is None]
        if missing:
            raise ctx.fail("soc", f"{soc_model!r} is not in the SoC table (known: {', '.join(soc.known_models())})",
                           f"fix the model name or give {', '.join(missing)} explicitly")
        assert soc_id is not None and arch is not None and vtcm is not None
    else:
        soc_model = info.model
        if soc_id is not None and soc_id != info.soc_id:
            raise ctx.fail("soc_id", f"{soc_id} contradicts {info.model} (soc_id {info.soc_id})",
                           "remove soc_id (it is filled from the SoC table) or fix `soc`")
        if arch is not None and arch != info.htp_arch:
            raise ctx.fail("htp_arch", f"{arch} contradicts {info.model} (HTP {info.htp_arch})",
                           "remove htp_arch (it is filled from the SoC table) or fix `soc`")
        if vtcm is not None and vtcm != info.vtcm_mb:
            raise ctx.fail("vtcm_mb", f"{vtcm} contradicts {info.model} (VTCM {info.vtcm_mb} MB)",
                           "remove vtcm_mb (it is filled from the SoC table) or fix `soc`")
        soc_id, arch, vtcm = info.soc_id, info.htp_arch, info.vtcm_mb
    if vtcm <= 0:
        raise ctx.fail("vtcm_mb", f"{vtcm} is not a size", "give the VTCM size in MB, e.g. 8")
    return soc_model, soc_id, arch, vtcm


def _tags(ctx: _Ctx, raw: dict) -> tuple[str, ...]:
    tags = _want(ctx, raw, "tags", list, default=[])
    for t in tags:
        if not isinstance(t, str) or not t:
            raise ctx.fail("tags", f"holds {t!r}", "tags must be non-empty strings")
    return tuple(tags)


def _host_device(ctx: _Ctx, raw: dict, base: Path, transport: TransportKind) -> DeviceSpec:
    """A local device that is the host: no SoC facts (QNN cells skip there)."""
    if not _RULES[transport].on_host:
        raise ctx.fail("soc", "`host` is only for `transport: local`",
                       "give the device's Qualcomm SoC model, e.g. SM8750")
    for k in ("soc_id", "htp_arch", "vtcm_mb"):
        if k in raw:
            raise ctx.fail(k, "is set on the host (soc: host has no HTP)", f"remove `{k}:` or give a Qualcomm `soc:`")
    work_dir = _want(ctx, raw, "work_dir", str, required=True)
    if not os.path.isabs(work_dir):
        work_dir = str((base / work_dir).resolve())
    return DeviceSpec(name=ctx.device or "", transport=transport, soc_model=soc.HOST, soc_id=0, htp_arch="",
                      vtcm_mb=0, work_dir=work_dir, tags=_tags(ctx, raw),
                      description=_want(ctx, raw, "description", str, default=""), source=ctx.path)


def _parse_top_locks(top: _Ctx, raw: Any, base: Path) -> Path | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise top.fail("locks", f"must be a mapping, got {type_name(raw)}",
                       "write `locks: {dir: PATH}` (the claim folder every run on this lab shares)")
    check_keys(top, "locks", raw, {"dir"})
    text = typed_get(top, raw, "dir", str, label="locks.dir", required=True,
                     missing_fix="add `dir: PATH` under `locks:`")
    return (base / Path(text).expanduser()).resolve()


def parse_inventory(data: Any, path: Path) -> Inventory:
    """Validate already-parsed YAML data (as loaded from `path`)."""
    top = _Ctx(path)
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
            raise _Ctx(path, f"#{i + 1}").fail(None, f"is a {type_name(raw)}, not a mapping",
                                               "write each device as `- name: ...` with its keys")
        name = raw.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            label = f"#{i + 1}"
            problem = "has no `name`" if name is None else f"has an invalid name {name!r}"
            raise _Ctx(path, label).fail("name", problem,
                                         "give each device a name of letters, digits, '.', '_' or '-'")
        if name in devices:
            raise _Ctx(path, name).fail("name", f"is a duplicate (device #{i + 1})",
                                        "give every device its own name")
        devices[name] = _parse_device(_Ctx(path, name), name, raw, base, coordinator)
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
        # libyaml's parser where PyYAML has it: ~6 ms of a `harness push` start-up less.
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InventoryError(f"{p}: YAML syntax error{where}: {problem}; fix the YAML at that place") from None
    return parse_inventory(data, p)


# LabgridSpec and its default resources live in inventory_labgrid.py; named here for importers.
__all__ = ["HTP_EMULATOR", "LABGRID_DEFAULT_RESOURCE", "TRANSPORTS", "AdbServer", "DeviceSpec", "Inventory",
           "LabgridSpec", "SshSpec", "load_inventory", "parse_inventory"]
