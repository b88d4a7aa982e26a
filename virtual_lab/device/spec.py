"""What a virtual device says about itself (`VirtualDeviceSpec`: CNXN banner, getprop, dumpsys)
and the error a bad spec or a path outside the sandbox raises."""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

GiB = 1024**3
# A virtual phone says it is arm64, and its sandbox runs the host's own binaries natively (a
# real glibc llm_demo, tests/real_runtime): its ABI list names both, as an emulator's does
# for what it translates. A spec's `props` can narrow it (a strict arm64 phone).
_HOST_ABI = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64-v8a", "arm64": "arm64-v8a"}
ABILIST = ",".join(dict.fromkeys(["arm64-v8a", _HOST_ABI.get(platform.machine().lower(), "arm64-v8a")]))


class DeviceError(ValueError):
    """Bad device spec or a device path outside the sandbox (message names what to fix)."""


@dataclass(frozen=True)
class VirtualDeviceSpec:
    """What the device says about itself (CNXN banner, getprop, dumpsys)."""

    name: str
    product: str = "sun"            # ro.product.name
    model: str = "CPH2653"          # ro.product.model (OnePlus 13)
    device: str = "OP5D0DL1"        # ro.product.device
    manufacturer: str = "OnePlus"
    soc_model: str = "SM8750"
    soc_manufacturer: str = "QTI"
    board_platform: str = "sun"
    sdk: int = 35
    release: str = "15"
    htp_arch: str = "v79"
    serialno: str = ""              # ro.serialno; defaults to a name-derived value
    disk_capacity_bytes: int = 64 * GiB
    battery_level: int = 85
    battery_temperature_decic: int = 312  # tenths of a degree C, as dumpsys prints it
    props: Mapping[str, str] = field(default_factory=dict)  # extra props, override the above

    def __post_init__(self) -> None:
        where = f"virtual device {self.name!r}"
        if not self.name or not isinstance(self.name, str):
            raise DeviceError("virtual device spec: `name` must be a non-empty string")
        for key in ("product", "model", "device"):
            value = getattr(self, key)
            if not value or any(c in value for c in ";:\n\0"):
                raise DeviceError(f"{where}: `{key}` must be non-empty without ';', ':' or newlines, got {value!r}")
        if not isinstance(self.disk_capacity_bytes, int) or self.disk_capacity_bytes <= 0:
            raise DeviceError(f"{where}: `disk_capacity_bytes` must be a positive integer")
        if not 0 <= int(self.battery_level) <= 100:
            raise DeviceError(f"{where}: `battery_level` must be 0..100, got {self.battery_level!r}")
        if not (self.htp_arch.startswith("v") and self.htp_arch[1:].isdigit()):
            raise DeviceError(f"{where}: `htp_arch` must look like 'v79', got {self.htp_arch!r}")
        for k, v in dict(self.props).items():
            if not isinstance(k, str) or not k or any(c in k for c in "=\n ") or "\n" in str(v):
                raise DeviceError(f"{where}: property {k!r} must be a name without '=', spaces or newlines")

    @classmethod
    def from_dict(cls, data: Mapping[str, object], source: str = "virtual device spec") -> VirtualDeviceSpec:
        if not isinstance(data, Mapping):
            raise DeviceError(f"{source}: expected a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DeviceError(f"{source}: unknown key(s) {unknown}; known: {sorted(known)}")
        try:
            return cls(**data)  # type: ignore[arg-type]  # device.json written by to_dict: its own fields
        except TypeError as exc:
            raise DeviceError(f"{source}: {exc}") from None

    def all_props(self) -> dict[str, str]:
        props = {
            "ro.product.name": self.product,
            "ro.product.model": self.model,
            "ro.product.device": self.device,
            "ro.product.manufacturer": self.manufacturer,
            "ro.product.brand": self.manufacturer,
            "ro.product.cpu.abi": "arm64-v8a",
            "ro.product.cpu.abilist": ABILIST,
            "ro.soc.model": self.soc_model,
            "ro.soc.manufacturer": self.soc_manufacturer,
            "ro.board.platform": self.board_platform,
            "ro.hardware": "qcom",
            "ro.build.version.sdk": str(self.sdk),
            "ro.build.version.release": self.release,
            "ro.serialno": self.serialno or f"vlab-{self.name}",
            "ro.vlab.htp_arch": self.htp_arch,
            "sys.boot_completed": "1",
        }
        props.update({str(k): str(v) for k, v in dict(self.props).items()})
        return props

    def banner(self, features: Sequence[str]) -> str:
        return (f"device::ro.product.name={self.product};ro.product.model={self.model};"
                f"ro.product.device={self.device};features={','.join(features)}")
