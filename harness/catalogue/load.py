"""The failure catalogue's loader: `lines.yaml` read and checked (the classes against
harness/outcomes.py FailureClass, each entry's scopes, shape and QNN facets)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

import yaml

from harness.catalogue.bounded import unbounded_problem
from harness.errors import HarnessError
from harness.outcomes import SIGNATURE_WARNING, FailureClass

DEFAULT_PATH = Path(__file__).with_name("lines.yaml")


class Scope(StrEnum):
    """Where a line is looked for (which reader sees the entry)."""

    RUNNER_OUTPUT = "runner-output"  # a runner's stdout and stderr (the runner's classifier)
    LOGCAT = "logcat"  # the device log's messages of a run (the runner's classifier)
    QNN_LOG = "qnn-log"  # a lowering's or run's log read by QNN's log reader (export builds included)
    EXPORT_BUILD = "export-build"  # an export stage's own output (the exporter's side)
    # Only the shape check's scan of a runtime log: a line the runner's classifier leaves to its
    # generic signatures (so its records keep their signature ids and classes).
    SHAPE_SCAN = "shape-scan"
    NPU_CONVERT = "npu-convert"  # MNN's compilefornpu output, read for placement (harness/qnn/mnn_npu_log.py)
    LOGITS_DIFF = "logits-diff"  # the logits tool's fatal lines: no comparison ran (harness/runners/logits_diff/parse.py)


RUNNER_SCOPES = frozenset({Scope.RUNNER_OUTPUT, Scope.LOGCAT})
SHAPE_SCOPES = RUNNER_SCOPES | {Scope.SHAPE_SCAN}


@dataclass(frozen=True)
class Entry:
    """One known line. `hint` is the fix (what to do); description and hint may name the
    regex's groups as {1}, {2}... ({0}: the whole line)."""

    id: str
    cls: str  # a FailureClass value, or SIGNATURE_WARNING
    regex: re.Pattern[str]
    description: str
    hint: str
    exit_codes: tuple[int, ...] | None = None
    scopes: frozenset[Scope] = RUNNER_SCOPES
    source: str = ""  # the public source of the text (a doc section, an upstream issue, a fixture)
    axis: str = ""  # for load failures: what does not fit (QAIRT, SoC/arch, device, libraries)
    shape_kind: str | None = None  # a harness/checks/shapes ShapeKind value
    shape_hint: str | None = None  # the shape finding's hint, when it says more than `hint`
    qnn_failure: str | None = None  # a harness/qnn/log.py QnnFailure value

    def applies(self, exit_code: int | None) -> bool:
        return self.exit_codes is None or exit_code in self.exit_codes

    def in_scope(self, *scopes: Scope) -> bool:
        return not self.scopes.isdisjoint(scopes)


@dataclass(frozen=True, eq=False)  # eq=False: hashed by identity, so views can be cached per catalogue
class Catalogue:
    classes: tuple[str, ...]  # the runner's classes, most severe first (the first found wins)
    entries: tuple[Entry, ...]  # file order: in every view the first matching entry wins
    source: Path

    def in_scope(self, *scopes: Scope) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.in_scope(*scopes))

    def entry(self, id: str) -> Entry:
        """The entry of `id`: a reader that needs one line's groups reads them from its entry."""
        for e in self.entries:
            if e.id == id:
                return e
        raise HarnessError(f"{self.source}: no entry {id!r}; restore it (a reader of the catalogue needs it)")

    def where(self, entry: Entry) -> str:
        return f"{self.source}: entry {entry.id!r}"


def load_catalogue(path: Path | str | None = None) -> Catalogue:
    """The catalogue file (the packaged one by default), validated."""
    return _load(Path(path) if path else DEFAULT_PATH)


@lru_cache(maxsize=8)
def _load(path: Path) -> Catalogue:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessError(f"{path}: signature file not found; reinstall the harness or pass an existing file") from None
    except yaml.YAMLError as exc:
        raise HarnessError(f"{path}: YAML syntax error ({str(exc).splitlines()[0]}); fix the file") from None
    if not isinstance(data, dict) or not isinstance(data.get("classes"), list) or not isinstance(
            data.get("signatures"), list):
        raise HarnessError(f"{path}: needs a `classes:` list and a `signatures:` list")
    classes = tuple(str(c) for c in data["classes"])
    unknown = [c for c in classes if c not in set(FailureClass)]
    if unknown:
        # One spelling per class: a class a record may carry is named in harness/outcomes.py.
        raise HarnessError(f"{path}: classes {', '.join(map(repr, unknown))} are not failure classes of "
                           "harness/outcomes.py FailureClass; fix the spelling or add the class there")
    entries: list[Entry] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["signatures"]):
        entry = _entry(raw, f"{path}: signature #{i + 1}", classes)
        if entry.id in seen:
            raise HarnessError(f"{path}: signature #{i + 1}: duplicate id {entry.id!r}; ids must be unique")
        seen.add(entry.id)
        entries.append(entry)
    return Catalogue(classes, tuple(entries), path)


_REQUIRED = ("id", "class", "regex", "description", "hint")


def _scopes(raw: Mapping[str, object], where: str) -> frozenset[Scope]:
    given = raw.get("scopes")
    if given is None:
        return RUNNER_SCOPES  # a runner-only signature file of older releases
    names = {s.value for s in Scope}
    if not isinstance(given, list) or not given or any(s not in names for s in given):
        raise HarnessError(f"{where}: key 'scopes' must be a non-empty list of {', '.join(sorted(names))}")
    return frozenset(Scope(s) for s in given)


def _shape(raw: Mapping[str, object], where: str) -> tuple[str | None, str | None]:
    shape = raw.get("shape")
    if shape is None:
        return None, None
    if not isinstance(shape, dict) or not isinstance(shape.get("kind"), str):
        raise HarnessError(f"{where}: key 'shape' must be a mapping with `kind:` (a ShapeKind) and optional `hint:`")
    hint = shape.get("hint")
    return str(shape["kind"]), str(hint) if hint else None


def _check_class(cls: str, scopes: frozenset[Scope], where: str, classes: tuple[str, ...]) -> None:
    if cls != SIGNATURE_WARNING and cls not in set(FailureClass):
        raise HarnessError(f"{where}: class {cls!r} is not a harness/outcomes.py FailureClass nor "
                           f"{SIGNATURE_WARNING!r}; fix the spelling or add the class there")
    runner = set(classes) | {SIGNATURE_WARNING}
    if not scopes.isdisjoint(RUNNER_SCOPES) and cls not in runner:
        # The runner ranks what it finds by `classes`: a class it cannot rank would be lost.
        raise HarnessError(f"{where}: class {cls!r} is not one of {', '.join(sorted(runner))}")


def _entry(raw: object, where: str, classes: tuple[str, ...]) -> Entry:
    if not isinstance(raw, dict):
        raise HarnessError(f"{where} is not a mapping; write it as `- id: ...` with {', '.join(_REQUIRED)}")
    missing = [k for k in _REQUIRED if not raw.get(k)]
    if missing:
        raise HarnessError(f"{where} ({raw.get('id', '?')}): missing {', '.join(missing)}; add them")
    where = f"{where} ({raw['id']})"
    scopes = _scopes(raw, where)
    _check_class(str(raw["class"]), scopes, where, classes)
    try:
        rx = re.compile(str(raw["regex"]), re.IGNORECASE if raw.get("ignore_case") else 0)
    except re.error as exc:
        raise HarnessError(f"{where}: key 'regex' does not compile ({exc}); fix the pattern") from None
    slow = unbounded_problem(rx.pattern)
    if slow is not None:
        raise HarnessError(f"{where}: key 'regex' {slow}; write it with fewer repeats (a literal between them)")
    codes = raw.get("exit_codes")
    if codes is not None and (not isinstance(codes, list) or not all(isinstance(c, int) for c in codes)):
        raise HarnessError(f"{where}: key 'exit_codes' must be a list of integers")
    shape_kind, shape_hint = _shape(raw, where)
    if (Scope.SHAPE_SCAN in scopes) and shape_kind is None:
        raise HarnessError(f"{where}: scope 'shape-scan' needs a `shape: {{kind: ...}}`")
    qnn = raw.get("qnn")
    if (qnn is None) == (Scope.QNN_LOG in scopes):
        raise HarnessError(f"{where}: an entry has a `qnn:` failure if and only if its scopes include 'qnn-log'")
    return Entry(str(raw["id"]), str(raw["class"]), rx, str(raw["description"]), str(raw["hint"]),
                 tuple(codes) if codes is not None else None, scopes, str(raw.get("source") or ""),
                 str(raw.get("axis") or ""), shape_kind, shape_hint, str(qnn) if qnn is not None else None)
