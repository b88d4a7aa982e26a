"""The sidecar's IO: the optional `qnn/export_manifest.json` (read by harness.export; format in
docs/qnn-export-artifacts.md), the fallback for a stub that is absent or unreadable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.export import SIDECAR_PATH, ExportFileError, ExportFolder, FileProblem
from harness.qnn.compiled_io.types import SOURCE_SIDECAR, ContextBinary, StubIO


def _read_sidecar(export: ExportFolder, problems: list[str]) -> dict[str, Any] | None:
    """The sidecar through the export reader; an unusable one is a problem, not an error."""
    try:
        found = export.sidecar
    except ExportFileError as exc:
        rel = exc.path.relative_to(export.root).as_posix()
        problems.append(f"{rel}: must be a JSON object" if exc.problem is FileProblem.NOT_OBJECT
                        else f"{rel}: not readable JSON ({exc.detail}); fix or delete it")
        return None
    return found.data if found is not None else None


def _sidecar_stub(sidecar: Mapping[str, Any], kind: str) -> StubIO | None:
    io = (sidecar.get("io") or {}).get(kind) if isinstance(sidecar.get("io"), dict) else None
    configs = io.get("configs") if isinstance(io, dict) else None
    if not isinstance(configs, list) or not configs:
        return None
    graphs = sidecar.get("graphs", {}).get(kind, []) if isinstance(sidecar.get("graphs"), dict) else []
    bins = tuple(ContextBinary(str(g), (), SOURCE_SIDECAR) for g in graphs if isinstance(g, str))
    outs = tuple(str(o) for o in configs[0].get("outputs", [])) if isinstance(configs[0], dict) else ()
    return StubIO(SIDECAR_PATH, SOURCE_SIDECAR, {}, outs, bins, tuple(configs))
