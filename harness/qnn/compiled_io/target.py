"""The compiled target (soc_id, dsp_arch): from the context binaries libQnnSystem or the SDK
read, else the sidecar, else unknown; and the context binary files of an export folder."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from harness import soc
from harness.errors import ArtifactError
from harness.qnn.compiled_io.binaries import binary_files
from harness.qnn.compiled_io.sdk import dump_context_binary, parse_context_dump, sdk_tool
from harness.qnn.compiled_io.types import (
    SOURCE_QNNLIB,
    SOURCE_SDK,
    SOURCE_SIDECAR,
    SOURCE_UNKNOWN,
    CompiledTarget,
    ContextBinary,
    StubIO,
)


def _target(stubs: Mapping[str, StubIO], sidecar: Mapping[str, Any] | None, problems: list[str]) -> CompiledTarget:
    read = [b for s in stubs.values() for b in s.binaries if b.source in (SOURCE_QNNLIB, SOURCE_SDK)]
    socs = {b.soc_id for b in read if b.soc_id is not None}
    archs = {b.dsp_arch for b in read if b.dsp_arch is not None}
    if len(socs) > 1 or len(archs) > 1:
        problems.append(f"the context binaries disagree on their target: soc_id {sorted(socs)}, "
                        f"dsp_arch {sorted(archs)}; recompile them together")
    if socs or archs:
        source = SOURCE_QNNLIB if all(b.source == SOURCE_QNNLIB for b in read) else SOURCE_SDK
        return CompiledTarget(min(socs) if len(socs) == 1 else None,
                              min(archs) if len(archs) == 1 else None, source)
    if sidecar is not None and (sidecar.get("soc_id") is not None or sidecar.get("dsp_arch")):
        raw = sidecar.get("soc_id")
        soc_id = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
        arch = soc.normalize_arch(sidecar["dsp_arch"]) if sidecar.get("dsp_arch") else None
        return CompiledTarget(soc_id, arch or (str(sidecar.get("dsp_arch")) or None), SOURCE_SIDECAR)
    return CompiledTarget(None, None, SOURCE_UNKNOWN)


def read_binary_target(export_dir: Path | str, qnn_sdk: Path | str | None) -> tuple[CompiledTarget, str] | None:
    """soc_id / dsp_arch from the first context binary of each kind through the SDK tool, and the
    binary it was read from; None without a tool or binaries, or when the dump names neither."""
    root = Path(export_dir)
    tool = sdk_tool(qnn_sdk)
    if tool is None:
        return None
    found: list[tuple[ContextBinary, str]] = []
    for rels in binary_files(root).values():
        if rels:
            first = min(rels, key=lambda r: int(re.sub(r"\D", "", PurePosixPath(r).name) or 0))
            found.append((parse_context_dump(dump_context_binary(tool, root / first), first, None), first))
    socs = {b.soc_id for b, _ in found if b.soc_id is not None}
    archs = {b.dsp_arch for b, _ in found if b.dsp_arch is not None}
    if not socs and not archs:
        return None
    if len(socs) > 1 or len(archs) > 1:
        raise ArtifactError(f"{root}: the context binaries disagree on their target (soc_id {sorted(socs)}, "
                            f"dsp_arch {sorted(archs)}); recompile them together")
    return (CompiledTarget(min(socs) if socs else None, min(archs) if archs else None, SOURCE_SDK),
            ", ".join(rel for _, rel in found))
