"""The tool versions an export's cache key holds: what the stage can read on this host without
running the user's command (QAIRT from the host QNN libraries, ExecuTorch and MNN from the
installed packages). A tool that is absent is None in the key, so installing it, or moving to
another QAIRT, changes the key and rebuilds (docs/exports.md#cache)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass

from harness.errors import HarnessError
from harness.qnn import HostQnn, find_host_qnn

# The tools each kind of export is built with: only theirs enter its key, so installing or
# upgrading another kind's tool rebuilds nothing (a fresh venv without MNN rebuilt every ExecuTorch
# export). The float reference is torch running ExecuTorch's model definitions, no QNN.
TOOLS_OF_KIND: Mapping[str, tuple[str, ...]] = {
    "executorch": ("qairt", "executorch", "torch"),
    "mnn": ("qairt", "mnn"),
}
REFERENCE_TOOLS = ("executorch", "torch")


def tools_for(kind: str, versions: Mapping[str, str | None], *, reference: bool = False) -> dict[str, str | None]:
    """The versions an export of `kind` is keyed by (every tool found for a kind the table lacks)."""
    names = REFERENCE_TOOLS if reference else TOOLS_OF_KIND.get(kind, tuple(versions))
    return {name: versions.get(name) for name in sorted(names)}


def package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class HostTools:
    """What the stage found once per night: the host QNN (or why not) and the versions."""

    qnn: HostQnn | None
    qnn_problem: str  # "" when found
    versions: dict[str, str | None]

    @classmethod
    def find(cls) -> HostTools:
        qnn, problem = None, ""
        try:
            qnn = find_host_qnn()
        except HarnessError as exc:  # QnnUnavailable, QnnAbiMismatch: each says what to do
            problem = str(exc)
        return cls(qnn, problem, {
            "qairt": qnn.qairt_build if qnn is not None else None,
            "executorch": package_version("executorch"),
            "torch": package_version("torch"),
            "mnn": package_version("MNN"),
        })
