"""The compiled QNN IO of an MNN export, read from the export's own artifacts.

One reader, a function of the export folder (`read_compiled_io(export_dir, qnn_sdk=None)`),
for the static shape guards (`harness.checks.shapes`) and provisioning's soc/arch guard.
Sources, best first (docs/qnn-export-artifacts.md describes each format):

- `stub`: the NPU stub `qnn/<name>.mnn` that MNN's `compilefornpu` writes. One `Plugin` op
  (type QNN) per context binary carries `path`, `allGraphName` (one graph per compiled shape:
  0 = prefill, 1 = decode; visual: one per image size), `allInputShape` (the dims of every
  input of every shape, concatenated), `inputs`/`outputs` and `o_<shape>_<k>` output dims;
  the stub's `Input` ops give the top-level names and ranks. Read through the `mnn` package's
  converter (the same call as harness.checks.quant), cached per (path, size, mtime).
- `libQnnSystem`: the host's QAIRT library (harness.qnn: `--qnn-sdk`'s x86 libraries,
  $QNN_SDK_ROOT or the onnxruntime-qnn wheel), in-process: each context binary's graphs, tensor
  dims, datatypes and encodings, its socModel and the QAIRT build that compiled it; also the
  binaries inside an ExecuTorch export's .pte files (`direct`). Preferred when found;
  HARNESS_HOST_QNN=off switches it off (qnnlib.py).
- `qnn-context-binary-utility`: with a QNN SDK and no host library, the context binaries' own
  graphs and tensor dims, and the soc/arch they were built for where the dump says so.
- `sidecar`: the optional `qnn/export_manifest.json` an export step may leave
  (format in docs/qnn-export-artifacts.md, read by harness.export); the fallback for exports
  that have nothing else.

What no artifact says (soc_id, dsp_arch without a reader of the binaries or the sidecar) is
reported as unknown. `python -m harness.qnn.compiled_io PTE|BIN|EXPORT_DIR [--json]` prints it (cli.py; the old
`python -m harness.compiled_io` still runs it).

The package is split by source: types.py (the types), stub.py, qnnlib.py, sdk.py, sidecar.py,
target.py (the compiled target), binaries.py (the binary files, and their target as QNN reads
them: provisioning's guard), read.py (read_compiled_io, which puts them together) and cli.py.
Names load on first use (PEP 562): a `harness push` imports binaries.py alone, not the stub
reader, the SDK tool's runner or ctypes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "binaries": ("BinariesTarget", "binary_files", "open_reader", "read_binaries_target"),
    "read": ("read_compiled_io",),
    "memo": ("ReadMemo",),
    "sdk": ("dump_context_binary", "parse_context_dump", "sdk_tool"),
    "stub": ("parse_stub", "read_stub", "stub_paths"),
    "target": ("read_binary_target",),
    "types": ("SOURCE_QNNLIB", "SOURCE_SDK", "SOURCE_SIDECAR", "SOURCE_STUB", "SOURCE_UNKNOWN", "CompiledIO",
              "CompiledTarget", "ContextBinary", "GraphIO", "StubIO"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.qnn.compiled_io.binaries import BinariesTarget as BinariesTarget
    from harness.qnn.compiled_io.binaries import binary_files as binary_files
    from harness.qnn.compiled_io.binaries import open_reader as open_reader
    from harness.qnn.compiled_io.binaries import read_binaries_target as read_binaries_target
    from harness.qnn.compiled_io.memo import ReadMemo as ReadMemo
    from harness.qnn.compiled_io.read import read_compiled_io as read_compiled_io
    from harness.qnn.compiled_io.sdk import dump_context_binary as dump_context_binary
    from harness.qnn.compiled_io.sdk import parse_context_dump as parse_context_dump
    from harness.qnn.compiled_io.sdk import sdk_tool as sdk_tool
    from harness.qnn.compiled_io.stub import parse_stub as parse_stub
    from harness.qnn.compiled_io.stub import read_stub as read_stub
    from harness.qnn.compiled_io.stub import stub_paths as stub_paths
    from harness.qnn.compiled_io.target import read_binary_target as read_binary_target
    from harness.qnn.compiled_io.types import SOURCE_QNNLIB as SOURCE_QNNLIB
    from harness.qnn.compiled_io.types import SOURCE_SDK as SOURCE_SDK
    from harness.qnn.compiled_io.types import SOURCE_SIDECAR as SOURCE_SIDECAR
    from harness.qnn.compiled_io.types import SOURCE_STUB as SOURCE_STUB
    from harness.qnn.compiled_io.types import SOURCE_UNKNOWN as SOURCE_UNKNOWN
    from harness.qnn.compiled_io.types import CompiledIO as CompiledIO
    from harness.qnn.compiled_io.types import CompiledTarget as CompiledTarget
    from harness.qnn.compiled_io.types import ContextBinary as ContextBinary
    from harness.qnn.compiled_io.types import GraphIO as GraphIO
    from harness.qnn.compiled_io.types import StubIO as StubIO
