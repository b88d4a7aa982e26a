"""The debug program's files (ExecuTorch's conventions, docs/localize.md#files) and what is missing.

The exporter writes the first four beside each other; a run adds the last two."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ArtifactError

DEBUG_PTE = "debug.pte"
ETRECORD = "etrecord.bin"
INPUTS = "debug_inputs.npz"
ENCODINGS = "qnn_encodings.json"  # what a saved ETRecord drops: QNN's per-node quantization
ETDUMP = "etdump.etdp"
DEBUG_OUTPUT = "debug_output.bin"
DEBUG_BUILD_FILES = (DEBUG_PTE, ETRECORD, INPUTS, ENCODINGS)  # what the exporter's debug build writes
DEBUG_FOLDER = "debug"  # where a debug build sits for a program's folder (`debug_build_places`)
REBUILD = ("rebuild with the exporter's debug build (examples/et_qnn/lower_decoder.py --debug-program, "
           "docs/localize.md#files; in a plan, the build's `debug_args` with `debug: true` or the suite's "
           "`localize: true`, docs/exports.md#debug-builds)")
# A debug buffer entry holds the tensor's bytes and is aligned; per-op slack for that and the
# non-quantized (float) outputs QNN may dump at 4 bytes a value.
_ENTRY_SLACK = 64


@dataclass(frozen=True)
class DebugFiles:
    folder: Path

    def path(self, name: str) -> Path:
        return self.folder / name

    def missing_build(self) -> list[str]:
        return [n for n in DEBUG_BUILD_FILES if not self.path(n).is_file()]

    def missing_run(self) -> list[str]:
        return [n for n in (ETDUMP, DEBUG_OUTPUT) if not self.path(n).is_file()]

    def require_build(self) -> None:
        missing = self.missing_build()
        if missing:
            raise ArtifactError(f"{self.folder}: no debug program here (missing {', '.join(missing)}); {REBUILD}")

    def encodings(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path(ENCODINGS).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"{self.path(ENCODINGS)}: unreadable ({exc}); {REBUILD}") from None
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise ArtifactError(f"{self.path(ENCODINGS)}: no 'nodes' list; {REBUILD}")
        return data


def debug_build_places(program_folder: Path) -> tuple[Path, ...]:
    """Where a program's debug build may sit: beside it, in its `debug/` folder, or (the export
    stage's layout, docs/exports.md#debug-builds) in `debug/<format>/` beside the format folders,
    since the program's own folder is a sealed cache entry."""
    return (program_folder, program_folder / DEBUG_FOLDER,
            program_folder.parent / DEBUG_FOLDER / program_folder.name)


def debug_buffer_size(encodings: dict[str, Any]) -> int:
    """Bytes for every reference op's output at 4 bytes a value (QNN dumps 1-2 byte quantized or
    4 byte float tensors), plus slack per entry: sized from the program, never a fixed guess."""
    total = 0
    for node in encodings["nodes"]:
        numel = 1
        for d in node.get("shape") or []:
            numel *= int(d)
        total += 4 * numel + _ENTRY_SLACK
    return max(total, 1 << 16)
