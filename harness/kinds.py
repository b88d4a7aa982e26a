"""How the harness reaches a device: `TransportKind` (devices.yaml's `transport:`), and
`by_kind`, the one way to build a table over the kinds. Every such table is total: a kind
added here without its entry in each table fails at import, naming the table's missing kinds
(tests/inventory/test_transport_kinds.py lists the tables and checks each)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import TypeVar

V = TypeVar("V")


class TransportKind(StrEnum):
    """str-valued: a kind is its devices.yaml spelling, in records and JSON as before."""

    ADB = "adb"
    SSH = "ssh"
    LOCAL = "local"


def by_kind(what: str, table: Mapping[TransportKind, V]) -> Mapping[TransportKind, V]:
    """`table` read-only, once it has an entry for every kind (`what` names it in the error)."""
    missing = [k.value for k in TransportKind if k not in table]
    if missing:
        raise TypeError(f"{what} has no entry for transport kind {', '.join(missing)}: add one")
    return MappingProxyType(dict(table))


__all__ = ["TransportKind", "by_kind"]
