"""Where provisioned sets live on a device (under its work_dir)::

    models/<name>/...                  a set, under its export names
    runtimes/<name>/...
    manifests/models/<name>.json       the set's manifest: written last, atomically (rename)
    manifests/models/<name>.journal    files already placed by an unfinished run (resume)
    .incoming/<run>/...                where a run's pushes land before they are verified
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
KIND_DIRS = {"model": "models", "runtime": "runtimes"}


def safe_name(name: str) -> str:
    cleaned = _SAFE_NAME.sub("_", name).strip("._") or "set"
    return cleaned[:120]


@dataclass(frozen=True)
class DeviceLayout:
    work_dir: str
    kind: str  # "model" | "runtime"
    name: str

    @property
    def set_dir(self) -> str:
        return posixpath.join(self.work_dir, KIND_DIRS[self.kind], self.name)

    @property
    def incoming(self) -> str:
        return posixpath.join(self.work_dir, ".incoming")

    @property
    def manifest(self) -> str:
        return posixpath.join(self.work_dir, "manifests", KIND_DIRS[self.kind], f"{self.name}.json")

    @property
    def journal(self) -> str:
        return posixpath.join(self.work_dir, "manifests", KIND_DIRS[self.kind], f"{self.name}.journal")


__all__ = ["KIND_DIRS", "DeviceLayout", "safe_name"]
