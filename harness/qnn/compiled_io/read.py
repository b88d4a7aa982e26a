"""read_compiled_io: an export folder's compiled QNN IO from every source, best first (the
package doc): the stubs, their binaries through the host's libQnnSystem.so when found, else
through the SDK tool when given, the sidecar where no stub was read; an ExecuTorch export's
programs through libQnnSystem.so."""

from __future__ import annotations

from pathlib import Path

from harness.errors import ArtifactError
from harness.export import ExportFolder
from harness.qnn.compiled_io.binaries import open_reader
from harness.qnn.compiled_io.qnnlib import read_direct, with_qnnlib
from harness.qnn.compiled_io.sdk import SDK_TOOL, _with_sdk, sdk_tool
from harness.qnn.compiled_io.sidecar import _read_sidecar, _sidecar_stub
from harness.qnn.compiled_io.stub import read_stub, stub_paths
from harness.qnn.compiled_io.target import _target
from harness.qnn.compiled_io.types import CompiledIO, StubIO
from harness.qnn.host import HostQnn


def read_compiled_io(export: Path | str | ExportFolder, *, qnn_sdk: Path | str | None = None,
                     host_qnn: HostQnn | None = None) -> CompiledIO:
    """Everything the export says about its compiled QNN IO and target (see the package doc).
    host_qnn: the QAIRT libraries to read the binaries with (default: harness.qnn.host.auto_host_qnn).
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
    lib, reader = open_reader(qnn_sdk, host_qnn)
    tool = sdk_tool(qnn_sdk) if lib is None else None
    if qnn_sdk and lib is None and tool is None:
        problems.append(f"--qnn-sdk {qnn_sdk}: no bin/*/{SDK_TOOL} there and {reader}; the context binaries were "
                        "not read")
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
        if lib is not None:
            stub = with_qnnlib(root, stub, lib, problems)
        elif tool is not None:
            stub = _with_sdk(root, stub, tool, problems)
        stubs[kind] = stub
    if sidecar is not None:
        for kind in ("llm", "visual"):
            if kind not in stubs:
                fallback = _sidecar_stub(sidecar, kind)
                if fallback is not None:
                    stubs[kind] = fallback
    direct = read_direct(root, lib, stubs, problems, unread, reader)
    return CompiledIO(root, stubs, _target({**stubs, **direct}, sidecar, problems), sidecar, tuple(problems),
                      unread, direct, reader)
