"""read_compiled_io: an export folder's compiled QNN IO from every source, best first (the
package doc): the stubs, through the SDK when given, the sidecar where no stub was read."""

from __future__ import annotations

from pathlib import Path

from harness.compiled_io.sdk import SDK_TOOL, _with_sdk, sdk_tool
from harness.compiled_io.sidecar import _read_sidecar, _sidecar_stub
from harness.compiled_io.stub import read_stub, stub_paths
from harness.compiled_io.target import _target
from harness.compiled_io.types import CompiledIO, StubIO
from harness.errors import ArtifactError
from harness.export import ExportFolder


def read_compiled_io(export: Path | str | ExportFolder, *, qnn_sdk: Path | str | None = None) -> CompiledIO:
    """Everything the export says about its compiled QNN IO and target (see the package doc).
    Raises ArtifactError only when the export is not a folder; what cannot be read is listed in
    `problems` / `unread`."""
    if not isinstance(export, ExportFolder):
        if not Path(export).is_dir():
            raise ArtifactError(f"export folder {export} does not exist or is not a directory")
        export = ExportFolder(Path(export))
    root = export.root
    problems: list[str] = []
    unread: dict[str, str] = {}
    sidecar = _read_sidecar(export, problems)
    tool = sdk_tool(qnn_sdk)
    if qnn_sdk and tool is None:
        problems.append(f"--qnn-sdk {qnn_sdk}: no bin/*/{SDK_TOOL} there; the context binaries were not read")
    stubs: dict[str, StubIO] = {}
    for kind, rel in stub_paths(root).items():
        try:
            stub = read_stub(root / rel, rel)
        except ArtifactError as exc:
            unread[kind] = str(exc)
            continue
        if not stub.binaries:
            unread[kind] = f"{rel}: no QNN Plugin op (not a compilefornpu stub)"
            continue
        if tool is not None:
            stub = _with_sdk(root, stub, tool, problems)
        stubs[kind] = stub
    if sidecar is not None:
        for kind in ("llm", "visual"):
            if kind not in stubs:
                fallback = _sidecar_stub(sidecar, kind)
                if fallback is not None:
                    stubs[kind] = fallback
    return CompiledIO(root, stubs, _target(stubs, sidecar, problems), sidecar, tuple(problems), unread)
