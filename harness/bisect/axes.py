"""The three axes a bisection walks, each an ordered list of versions (oldest first):

- `inputs`: the commits of the git repository that holds the plan build's `inputs` (recipe.py),
  from the older point to the newer along the ancestry path; each re-exported through the cache;
- `runtime`: runtime folders (an llm_demo or qnn_llama_runner build each), given in order;
- `qairt`: QAIRT SDK roots, given in order.

A point (`--good`, `--bad`) names a version: a commit (any git revision) on the export axis; a
folder's path, its name, or its position (0-based) on the others."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from harness.lab import UsageError


class AxisKind(StrEnum):
    INPUTS = "inputs"
    RUNTIME = "runtime"
    QAIRT = "qairt"

    @property
    def option(self) -> str | None:
        """The plan option a version of this axis replaces (None: the model folder)."""
        return {AxisKind.RUNTIME: "runtime_dir", AxisKind.QAIRT: "qnn_sdk"}.get(self)


@dataclass(frozen=True)
class Version:
    label: str  # what the report says: "a1b2c3d4e5 plant the fault", "V2"
    value: str  # the commit's sha, the folder's path


def folder_versions(kind: AxisKind, folders: list[str]) -> list[Version]:
    """Ordered folders as versions, each checked to be a folder; labelled by name (by path when
    two share a name)."""
    if len(folders) < 2:
        raise UsageError(f"harness bisect --axis {kind}: give at least two folders in order (--versions A B ...)")
    paths = [Path(f) for f in folders]
    for p in paths:
        if not p.is_dir():
            raise UsageError(f"harness bisect --versions: {p} is not a folder; give the {kind} folders in order")
    names = [p.name for p in paths]
    unique = len(set(names)) == len(names)
    return [Version(p.name if unique else str(p), str(p)) for p in paths]


def point_index(versions: list[Version], point: str, option: str) -> int:
    """The version a point names: its path, its label, or its position."""
    for i, v in enumerate(versions):
        if point in (v.value, v.label) or Path(point).resolve() == Path(v.value).resolve():
            return i
    if point.isdigit() and int(point) < len(versions):
        return int(point)
    raise UsageError(f"harness bisect {option} {point}: not one of the versions "
                     f"({', '.join(v.label for v in versions)}); name a folder, its name or its position")
