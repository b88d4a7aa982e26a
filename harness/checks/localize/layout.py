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
        return [n for n in DEBUG_BUILD_FILES if not self.path(n).is_file()]  # a FIFO is missing too

    def missing_run(self) -> list[str]:
        return [n for n in (ETDUMP, DEBUG_OUTPUT) if not self.path(n).is_file()]

    def require_build(self) -> None:
        missing = self.missing_build()
        if missing:
            raise ArtifactError(f"{self.folder}: no debug program here (missing {', '.join(missing)}); {REBUILD}")

    def encodings(self) -> dict[str, Any]:
        """The encodings file, checked to be the exporter's shape (a damaged one is an ArtifactError,
        never a hang on a FIFO or a traceback on a node of the wrong type)."""
        path = self.path(ENCODINGS)
        if not path.is_file():  # a FIFO or a device node would block the read (is_file follows links)
            raise ArtifactError(f"{path}: not a regular file; {REBUILD}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
            raise ArtifactError(f"{path}: unreadable ({why}); {REBUILD}") from None
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise ArtifactError(f"{path}: no 'nodes' list; {REBUILD}")
        for i, node in enumerate(data["nodes"]):
            bad = _bad_node(node)
            if bad:
                raise ArtifactError(f"{path}: nodes[{i}]: {bad}; {REBUILD}")
        return data


def _bad_node(node: object) -> str:
    """What is wrong with one node of the encodings ("" when nothing): the keys the comparison reads."""
    if not isinstance(node, dict):
        return f"a {type(node).__name__}, not an object"
    if not isinstance(node.get("name"), str):
        return "no 'name' string"
    for key in ("target", "module"):
        if key in node and not isinstance(node[key], str):
            return f"'{key}' is not a string"
    for key in ("shape", "axis_order", "inputs"):
        value = node.get(key)
        if value is not None and not isinstance(value, list):
            return f"'{key}' is not a list"
    if any(not _is_int(d) or d < 0 for d in node.get("shape") or []):
        return f"'shape' {node['shape']!r} is not a list of sizes"
    if any(not _is_int(d) for d in node.get("axis_order") or []):
        return "'axis_order' is not a list of integers"
    if any(not isinstance(x, str) for x in node.get("inputs") or []):
        return "'inputs' is not a list of node names"
    quant = node.get("quant")
    if quant is not None and quant != {}:
        if not isinstance(quant, dict):
            return "'quant' is not an object"
        for key in ("scale", "zero_point", "quant_min", "quant_max"):
            if not isinstance(quant.get(key), (int, float)) or isinstance(quant.get(key), bool):
                return f"quant '{key}' is not a number"
        if not isinstance(quant.get("dtype"), str) or not quant["dtype"].isidentifier():
            return "quant 'dtype' is not a torch dtype name"
    return ""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def debug_build_places(program_folder: Path) -> tuple[Path, ...]:
    """Where a program's debug build may sit: beside it, in its `debug/` folder, or (the export
    stage's layout, docs/exports.md#debug-builds) in `debug/<format>/` beside the format folders,
    since the program's own folder is a sealed cache entry."""
    return (program_folder, program_folder / DEBUG_FOLDER,
            program_folder.parent / DEBUG_FOLDER / program_folder.name)


def debug_files_for(folder: Path) -> DebugFiles:
    """The export's debug build: beside its program, else in its `debug/` folder, else where the
    export stage lays it out (`debug_build_places`); the folder itself when none is complete."""
    for where in debug_build_places(folder):
        if not DebugFiles(where).missing_build():
            return DebugFiles(where)
    return DebugFiles(folder)


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
