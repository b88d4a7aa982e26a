"""Typed evidence beside a record's verdict: what a check measured, as a frozen type per check
family, turned into JSON only where the record leaves as bytes (its JSON line, JUnit, SQLite).

A family is a frozen dataclass with a class-level `KEY` (the name its JSON has always had in the
record's `extras`, so a record's JSON line reads back byte-equal), `to_json()` and `of_json()`.
A record holds them in an `EvidenceSet` keyed by family; `extras` keeps only free-form detail.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self, TypeVar

# What json.loads returns for an object: the byte boundary's own type.
JsonObject = dict[str, Any]


class Evidence(Protocol):
    """One check family's evidence: frozen, with its JSON at the byte boundary only."""

    KEY: ClassVar[str]

    def to_json(self) -> JsonObject: ...

    @classmethod
    def of_json(cls, raw: JsonObject) -> Self: ...


E = TypeVar("E", bound=Evidence)


@dataclass
class EvidenceSet:
    """A record's typed evidence, one per family."""

    _items: dict[str, Evidence] = field(default_factory=dict)

    def put(self, evidence: Evidence) -> None:
        self._items[type(evidence).KEY] = evidence

    def get(self, kind: type[E]) -> E | None:
        found = self._items.get(kind.KEY)
        return found if isinstance(found, kind) else None

    def drop(self, kind: type[Evidence]) -> None:
        self._items.pop(kind.KEY, None)

    def __iter__(self) -> Iterator[Evidence]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def to_json(self) -> JsonObject:
        """Each family's JSON under its key (merged into the record's extras by the record)."""
        return {key: ev.to_json() for key, ev in sorted(self._items.items())}

    @classmethod
    def split(cls, extras: Mapping[str, Any], kinds: Mapping[str, type[Evidence]]) -> tuple[EvidenceSet, dict[str, Any]]:
        """A record's extras read back: the families it knows, typed, and the free-form rest."""
        found = cls()
        rest: dict[str, Any] = {}
        for key, value in extras.items():
            kind = kinds.get(key)
            if kind is None or not isinstance(value, dict):
                rest[key] = value
                continue
            try:
                found.put(kind.of_json(value))
            except (KeyError, TypeError, ValueError):
                rest[key] = value  # an older or damaged line still reads: its detail stays free-form
        return found, rest
