"""A transport kind is one object registered once (harness/inventory/kinds/): every kind meets the
contract (its opener opens a Transport of that kind; it is described, listed and located), a
broken kind is refused where it registers, and nothing in harness/ compares a kind with a string
or tests which kind a device is outside the kind's own file and its driver."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from harness.inventory import (
    ADB,
    KINDS,
    LOCAL,
    SSH,
    Ctx,
    DeviceSpec,
    KindRegistry,
    LabgridSpec,
    Link,
    TransportKind,
    YamlMap,
    parse_inventory,
)
from harness.lab import status
from harness.transport import open_transport

REPO = Path(__file__).resolve().parents[2]
ENTRIES: dict[TransportKind, dict[str, object]] = {
    ADB: {"name": "phone", "transport": "adb", "serial": "R5CX1", "soc": "SM8750"},
    SSH: {"name": "car", "transport": "ssh", "soc": "SA8295", "work_dir": "/data/harness",
          "ssh": {"host": "car-01.lab", "user": "harness"}},
    LOCAL: {"name": "host", "transport": "local", "work_dir": "work"},
}


def test_the_built_in_kinds_are_registered_once() -> None:
    assert [k for k in KINDS if k in ENTRIES] == [ADB, LOCAL, SSH]
    assert KINDS.names()[:3] == ("adb", "local", "ssh")


@pytest.mark.parametrize("kind", list(ENTRIES), ids=str)
def test_every_kind_meets_the_contract(kind: TransportKind, tmp_path: Path) -> None:
    module, _, name = kind.opener.partition(":")
    assert callable(getattr(importlib.import_module(module), name)), kind.opener
    device = parse_inventory({"devices": [ENTRIES[kind]]}, tmp_path / "devices.yaml").get(str(ENTRIES[kind]["name"]))
    assert device.transport is kind
    assert device.describe().startswith(f"{device.name}: ")
    assert status.format_status([status.DeviceStatus(device, "free")]).splitlines()[-1].startswith(device.name)
    assert kind.address(device)
    transport = open_transport(device)
    try:
        assert transport.kind is kind
    finally:
        transport.close()


class _Sketch(TransportKind):
    name = "sketch"
    opener = "harness.transport:open_local"

    def link(self, ctx: Ctx, raw: YamlMap, base: Path, labgrid: LabgridSpec | None) -> Link:
        return None, None, None

    def where(self, d: DeviceSpec) -> str:
        return "sketch"

    status_where = address = where


class _BadName(_Sketch):
    name = "Not A Name"


class _BadOpener(_Sketch):
    opener = "nowhere"


def test_a_broken_kind_is_refused_where_it_registers() -> None:
    registry = KindRegistry()
    with pytest.raises(TypeError, match=r"_BadName.name must be a lower-case word"):
        registry.register(_BadName())
    with pytest.raises(TypeError, match=r"transport kind sketch: opener must name its driver as 'module:callable'"):
        registry.register(_BadOpener())
    registry.register(_Sketch())
    with pytest.raises(TypeError, match=r"transport kind sketch is registered twice"):
        registry.register(_Sketch())
    assert "sketch" not in KINDS.names()  # a registry of its own: the lab's is untouched


def test_a_kind_is_the_same_object_after_a_copy(tmp_path: Path) -> None:
    import copy

    device = parse_inventory({"devices": [ENTRIES[ADB]]}, tmp_path / "devices.yaml").get("phone")
    assert copy.deepcopy(device).transport is ADB


def _string_kind_comparisons(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        names = [s.attr if isinstance(s, ast.Attribute) else s.id if isinstance(s, ast.Name) else "" for s in sides]
        literal = any(isinstance(s, ast.Constant) and s.value in set(KINDS.names()) for s in sides)
        if literal and any(n in ("transport", "kind", "name") for n in names):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_no_kind_is_compared_with_a_string_in_harness() -> None:
    found = [hit for path in sorted((REPO / "harness").rglob("*.py")) for hit in _string_kind_comparisons(path)]
    assert not found, "compare kinds as objects (or give the kind a method), not strings: " + ", ".join(found)


def test_no_table_over_the_kinds_outside_their_files() -> None:
    """What differs by kind is a field or method of the kind: a table keyed by kinds, or a branch
    on one kind, outside harness/inventory/kinds/ is a second place to edit for a new kind."""
    allowed = {"harness/lab/adb_limits.py"}  # adb's own TCP-serial limit: adb only, by its nature
    found = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        if rel.startswith("harness/inventory/kinds/") or rel in allowed:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in ("ADB", "SSH", "LOCAL") and isinstance(node.ctx, ast.Load):
                found.append(f"{rel}:{node.lineno} names {node.id}")
    drivers = {"harness/transport/adb/transport.py", "harness/transport/ssh/transport.py", "harness/transport/local.py"}
    found = [f for f in found if f.split(":")[0] not in drivers]  # a driver names its own kind (Transport.kind)
    assert not found, "\n".join(found)
