"""A newcomer's task, done in one file: a transport kind of its own (`loopback`, this host under a
name, with a driver of its own), registered once and found by everything else: devices.yaml, its
validation, `harness devices`, `lab status`, DeviceSpec.describe and opening. No file of harness/
changes for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import cli
from harness.errors import InventoryError
from harness.inventory import KINDS, Ctx, DeviceSpec, LabgridSpec, Link, TransportKind, YamlMap, load_inventory, want
from harness.lab import status
from harness.transport import LocalTransport, RetryPolicy, open_transport


class Loopback(TransportKind):
    name = "loopback"
    keys = frozenset({"loopback_name"})
    needs_soc = False
    on_host = True
    opener = f"{__name__}:LoopbackTransport"

    def link(self, ctx: Ctx, raw: YamlMap, base: Path, labgrid: LabgridSpec | None) -> Link:
        loop = want(ctx, raw, "loopback_name", str, required=True)
        return loop, None, None  # its name rides in the serial: a loopback link has nothing else

    def where(self, d: DeviceSpec) -> str:
        return f"loopback {d.serial}"

    def status_where(self, d: DeviceSpec) -> str:
        return f"lo {d.serial}"

    def address(self, d: DeviceSpec) -> str:
        return f"lo:{d.serial}"


LOOPBACK = Loopback()


class LoopbackTransport(LocalTransport):
    kind = LOOPBACK

    def __init__(self, device: DeviceSpec, retry: RetryPolicy | None = None):
        super().__init__(device, retry)


@pytest.fixture
def loopback() -> Iterator[TransportKind]:
    KINDS.register(LOOPBACK)
    try:
        yield LOOPBACK
    finally:
        KINDS.unregister(LOOPBACK)


def _devices_yaml(tmp_path: Path, entry: str) -> Path:
    path = tmp_path / "devices.yaml"
    path.write_text(f"devices:\n  - name: lo0\n    transport: loopback\n    work_dir: work\n{entry}", encoding="utf-8")
    return path


def test_a_new_kind_is_loaded_listed_described_and_opened(loopback: TransportKind, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _devices_yaml(tmp_path, "    loopback_name: bench\n    soc: host\n")
    device = load_inventory(path).get("lo0")
    assert device.transport is loopback and device.serial == "bench"
    assert device.describe() == "lo0: loopback bench, host (no HTP)"
    assert status.format_status([status.DeviceStatus(device, "free")]).splitlines()[-1].split()[:3] == \
        ["lo0", "lo", "bench"]

    assert cli.main(["devices", "--file", str(path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("lo0"))
    assert row.split()[1:3] == ["loopback", "lo:bench"]

    (tmp_path / "work").mkdir()
    transport = open_transport(device)
    try:
        assert isinstance(transport, LoopbackTransport) and transport.kind is loopback
        assert transport.shell(["echo", "hello"]).stdout.strip() == "hello"
    finally:
        transport.close()


def test_its_validation_is_its_own_and_its_key_is_refused_elsewhere(loopback: TransportKind, tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"device 'lo0', key 'loopback_name': is missing"):
        load_inventory(_devices_yaml(tmp_path, "    soc: host\n"))
    phone = tmp_path / "phone.yaml"
    phone.write_text("devices:\n  - {name: p, transport: adb, serial: R5, soc: SM8750, loopback_name: x}\n")
    with pytest.raises(InventoryError, match=r"key .loopback_name.: is set on a `transport: adb` device; remove it or set "
                                             r"`transport: loopback`"):
        load_inventory(phone)


def test_unregistered_it_is_not_a_transport(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"'loopback' is not a transport; use one of adb, local, ssh"):
        load_inventory(_devices_yaml(tmp_path, "    soc: host\n"))
