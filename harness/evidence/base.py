"""Typed evidence beside a record's verdict: what a check measured, as a frozen type per check
family, turned into JSON only where the record leaves as bytes (its JSON line, JUnit, SQLite).

A family is a frozen dataclass with a class-level `KEY` (the name its JSON has always had in the
record's `extras`, so a record's JSON line reads back byte-equal), `to_json()` and `of_json()`.
Its JSON is an object, or the one value the key always held (`timing`: a word). A family that
was always written as several top-level keys of `extras` (the lab's bookkeeping: `run_id`,
`plan_entry`, ...) names them in `KEYS` (a `Spread` family): its JSON object's items sit there,
side by side, and its `KEY` only names it in memory.
A record holds them in an `EvidenceSet` keyed by family; `extras` keeps only free-form detail.

A family also says, in its own module, how the reports show it (the reporters loop over a
record's evidence and name no family): `junit()` its JUnit properties, `rows()` its lines on the
HTML page, `views()` what it gives the page's own sections (typed views each section reads by
type: `EvidenceSet.views`), `COLUMNS` and `columns()` its history columns (how a night's group of
records folds them into one value: `Fold`). tests/report/test_evidence_registry.py keeps every family complete.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Protocol, Self, TypeVar

# What json.loads returns for an object: the byte boundary's own type.
JsonObject = dict[str, Any]


# A history column's value as SQLite holds it.
Cell = float | str | None


class Fold(StrEnum):
    """How the history folds one column over a night's records of one (device, model, pair)."""

    MEDIAN = "median"  # of the numbers given
    MAX = "max"  # the worst (largest) number
    FIRST = "first"  # the first record's value that is not None
    DISTINCT = "distinct"  # each distinct text, sorted, comma-joined


@dataclass(frozen=True)
class Column:
    """One history column a family fills (several families may fill the same one alike)."""

    name: str
    sql: str  # REAL | TEXT
    fold: Fold = Fold.FIRST


class Tone(StrEnum):
    """A page line's colour: its CSS class."""

    PLAIN = "plain"
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Row:
    """One line a family shows on the HTML page, under the cell or test it belongs to."""

    label: str  # what it is ("float reference", "built")
    text: str
    tone: Tone = Tone.PLAIN
    first: bool = False  # a failure's reason: shown before anything else in its cell


class Evidence(Protocol):
    """One check family's evidence: frozen, with its JSON at the byte boundary only, and how each
    report shows it."""

    KEY: ClassVar[str]
    COLUMNS: ClassVar[tuple[Column, ...]]  # the history columns it fills (may be none)

    def to_json(self) -> object: ...

    @classmethod
    def of_json(cls, raw: object) -> Self: ...

    def junit(self) -> dict[str, str | None]:
        """Its JUnit properties (a None value is left out)."""
        ...

    def rows(self) -> tuple[Row, ...]:
        """Its lines on the HTML page, under its cell or test (none: a section shows it, or nothing to read)."""
        ...

    def views(self) -> tuple[object, ...]:
        """What it gives the page's own sections (where it ran, where it departs, the export verdicts,
        the QNN profiles, the per-op history): each section reads the view types it knows, whichever
        family gave them; a view type lives beside the family that first gave it."""
        ...

    def columns(self) -> dict[str, Cell]:
        """Its history values, by the names in COLUMNS."""
        ...


def fmt3(value: float | None) -> str | None:
    """A figure for JUnit: 3 decimals, trailing zeros cut."""
    return None if value is None else f"{value:.3f}".rstrip("0").rstrip(".")


def fmt6(value: float | None) -> str | None:
    """A small figure (KL, NLL) for JUnit: 6 decimals, trailing zeros cut."""
    return None if value is None else f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def text_of(value: object) -> str | None:
    return None if value is None else str(value)


class Spread(Evidence, Protocol):
    """A family written as several top-level keys of `extras` (KEYS), not one."""

    KEYS: ClassVar[tuple[str, ...]]


def json_object(raw: object, what: str) -> JsonObject:
    """`raw` as a JSON object, or TypeError naming what it should have been."""
    if not isinstance(raw, dict):
        raise TypeError(f"{what} is not a JSON object")
    return raw


def json_number(value: object) -> float | None:
    """A finite JSON number as a float; None for anything else (a bool, text, null, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def json_int(value: object) -> int | None:
    """A JSON integer; None for anything else (a bool, a float, text, null)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_texts(value: object, what: str) -> tuple[str, ...]:
    """A JSON list of texts (null or absent: none), or TypeError naming what it should have been."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{what} is not a list of texts")
    return tuple(value)


def json_floats(value: object, what: str) -> tuple[float, ...]:
    """A JSON list of numbers as floats (null or absent: none), or TypeError naming what it should have been."""
    if value is None:
        return ()
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int | float) for v in value):
        raise TypeError(f"{what} is not a list of numbers")
    return tuple(float(v) for v in value)


def _spread_keys(kind: type[Evidence]) -> tuple[str, ...]:
    keys = getattr(kind, "KEYS", ())
    return keys if isinstance(keys, tuple) else ()


E = TypeVar("E", bound=Evidence)
V = TypeVar("V")


@dataclass
class EvidenceSet:
    """A record's typed evidence, one per family."""

    _items: dict[str, Evidence] = field(default_factory=dict)

    def put(self, evidence: Evidence) -> None:
        self._items[type(evidence).KEY] = evidence

    def get(self, kind: type[E]) -> E | None:
        found = self._items.get(kind.KEY)
        return found if isinstance(found, kind) else None

    def views(self, kind: type[V]) -> list[V]:
        """Every view of `kind` its families give a page section, in family order."""
        return [v for ev in self._items.values() for v in ev.views() if isinstance(v, kind)]

    def drop(self, kind: type[Evidence]) -> None:
        self._items.pop(kind.KEY, None)

    def __iter__(self) -> Iterator[Evidence]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def to_json(self) -> JsonObject:
        """Each family's JSON under its key, a spread family's keys side by side (merged into the
        record's extras by the record)."""
        out: JsonObject = {}
        for key, ev in sorted(self._items.items()):
            if _spread_keys(type(ev)):
                out.update(json_object(ev.to_json(), f"{key}'s spread keys"))
            else:
                out[key] = ev.to_json()
        return out

    @classmethod
    def split(cls, extras: Mapping[str, object], kinds: Mapping[str, type[Evidence]]) -> tuple[EvidenceSet, dict[str, object]]:
        """A record's extras read back: the families it knows, typed, and the free-form rest.
        `kinds` maps each key a family is written under (all of a spread family's KEYS) to it."""
        found = cls()
        rest: dict[str, object] = {}
        spread: dict[type[Evidence], dict[str, object]] = {}
        for key, value in extras.items():
            kind = kinds.get(key)
            if kind is not None and _spread_keys(kind):
                spread.setdefault(kind, {})[key] = value
            elif kind is not None:
                found._read(kind, value, {key: value}, rest)
            else:
                rest[key] = value
        for kind, values in spread.items():
            found._read(kind, values, values, rest)
        return found, rest

    def _read(self, kind: type[Evidence], raw: object, written: Mapping[str, object], rest: dict[str, object]) -> None:
        try:
            self.put(kind.of_json(raw))
        except (KeyError, TypeError, ValueError, AttributeError):
            rest.update(written)  # an older or damaged line still reads: its detail stays free-form
