"""The transport kind is an enum and every table over it is total: a kind without its entry
fails here (and at import, through `by_kind`), never as a KeyError at run time in
`inventory.describe` or `lab status`. Nothing in harness/ compares a kind with a string."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.inventory import LABGRID_DEFAULT_RESOURCE, WHERE, DeviceSpec, parse_inventory
from harness.kinds import TransportKind, by_kind
from harness.lab import status
from harness.transport import OPENERS, open_transport

REPO = Path(__file__).resolve().parents[2]
TABLES: dict[str, Mapping[TransportKind, Any]] = {
    "inventory.WHERE": WHERE, "inventory.labgrid.LABGRID_DEFAULT_RESOURCE": LABGRID_DEFAULT_RESOURCE,
    "factory.OPENERS": OPENERS, "lab.status.WHERE": status.WHERE, "cli.ADDRESS": cli.ADDRESS,
}
ENTRIES: dict[TransportKind, dict[str, Any]] = {
    TransportKind.ADB: {"name": "phone", "transport": "adb", "serial": "R5CX1", "soc": "SM8750"},
    TransportKind.SSH: {"name": "car", "transport": "ssh", "soc": "SA8295", "work_dir": "/data/harness",
                        "ssh": {"host": "car-01.lab", "user": "harness"}},
    TransportKind.LOCAL: {"name": "host", "transport": "local", "work_dir": "work"},
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_table_has_every_kind(name: str) -> None:
    assert set(TABLES[name]) == set(TransportKind), name


def test_a_table_without_a_kind_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match=r"my table has no entry for transport kind local"):
        by_kind("my table", {TransportKind.ADB: 1, TransportKind.SSH: 2})


def _devices(tmp_path: Path) -> dict[TransportKind, DeviceSpec]:
    assert set(ENTRIES) == set(TransportKind), "give every kind a device here"
    inv = parse_inventory({"devices": list(ENTRIES.values())}, tmp_path / "devices.yaml")
    return {kind: inv.get(entry["name"]) for kind, entry in ENTRIES.items()}


def test_every_kind_is_described_listed_and_opened(tmp_path: Path) -> None:
    for kind, device in _devices(tmp_path).items():
        assert device.transport is kind
        assert device.describe().startswith(f"{device.name}: ")
        assert status.format_status([status.DeviceStatus(device, "free")]).splitlines()[-1].startswith(device.name)
        assert cli.ADDRESS[kind](device)
        transport = open_transport(device)
        try:
            assert transport.kind is kind
        finally:
            transport.close()


def _string_kind_comparisons(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        names = [s.attr if isinstance(s, ast.Attribute) else s.id if isinstance(s, ast.Name) else "" for s in sides]
        literal = any(isinstance(s, ast.Constant) and s.value in {k.value for k in TransportKind} for s in sides)
        if literal and any(n in ("transport", "kind") for n in names):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_no_kind_is_compared_with_a_string_in_harness() -> None:
    found = [hit for path in sorted((REPO / "harness").rglob("*.py")) for hit in _string_kind_comparisons(path)]
    assert not found, "compare TransportKind members (or add a table entry), not strings: " + ", ".join(found)
