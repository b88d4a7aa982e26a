"""The debug program's run for localization (harness.checks.localize), where the cell ran:

* on a device (a phone over adb, a board over ssh, any transport): ExecuTorch's own runner contract
  (docs/executorch-runner.md#the-debug-run-on-a-device): the debug .pte, its raw inputs and
  `input_list.txt` pushed as one set, incrementally (harness.provision.sync: a second run pushes
  nothing), then `qnn_executor_runner --dump_intermediate_outputs --debug_buffer_size N` from the
  provisioned runtime folder (beside `qnn_llama_runner`), the buffer sized from the program; the
  ETDump and the debug buffer pulled;
* on the host's emulated HTP: ExecuTorch's pybindings (harness.hostrt.executorch.debug).

Either way the export folder is only read; the run's files land in `work`, beside copies of the
two small files the comparison reads (docs/localize.md#files). A run that fails is a `DebugRunFailed`
naming the catalogue's class and line (harness/catalogue/lines.yaml) and the runner's own error."""

from __future__ import annotations

import hashlib
import posixpath
import shutil
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.checks.localize import (
    DEBUG_OUTPUT,
    DEBUG_PTE,
    ENCODINGS,
    ETDUMP,
    ETRECORD,
    INPUTS,
    DebugFiles,
    debug_buffer_size,
)
from harness.errors import ArtifactError, HarnessError, TransportError
from harness.hostfiles import write_atomic
from harness.hostrt.executorch import DEBUG_MODULE, EXECUTOR_NAME, parse_result
from harness.provision import (
    ArtifactFile,
    DeviceLayout,
    ProvisionedRuntime,
    SyncResult,
    default_cache,
    safe_name,
    sync_set,
)
from harness.runners.signatures import Classification, SignatureSet, load_signatures
from harness.transport import Transport

INPUT_LIST = "input_list.txt"  # SimpleADB's name (backends/qualcomm/export_utils.py)


class DebugRunFailed(ArtifactError):
    """The debug run failed; `cls` is the catalogue's class (a FailureClass value) and `ids` its lines."""

    def __init__(self, message: str, cls: str = "runtime-error", ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.cls, self.ids = cls, ids


def _copy_compared(export: DebugFiles, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    for name in (ETRECORD, ENCODINGS):
        # The comparison reads them beside the run: always this build's (a work folder reused for
        # another build kept that build's ETRecord, and every op compared against the wrong graph).
        tmp = work / f".{name}.tmp"
        shutil.copyfile(export.path(name), tmp)
        tmp.replace(work / name)


def _runner_said(stdout: str, stderr: str, n: int = 3) -> str:
    """The runner's own error first (a `RuntimeError: ...` line, ExecuTorch's `[file:N]` error), then
    its last lines: QNN's teardown lines come after the cause and must not hide it."""
    lines = [x.strip() for x in f"{stdout}\n{stderr}".splitlines() if x.strip()]
    causes = [x for x in lines if x.startswith(("RuntimeError", "[Error]")) or "Ran out of space" in x
              or "ET_CHECK" in x or "failed with status" in x]
    tail = [x for x in lines[-n:] if x not in causes]
    return " | ".join([*causes[-2:], *tail])


def run_debug_program(export: DebugFiles, work: Path, env: Mapping[str, str], timeout_s: float = 600.0) -> DebugFiles:
    """On the host's emulated HTP: the runner reads the export's program and inputs and writes the
    ETDump and the debug buffer into `work`, beside copies of the ETRecord and the encodings."""
    export.require_build()
    _copy_compared(export, work)
    size = debug_buffer_size(export.encodings())
    argv = [sys.executable, "-m", DEBUG_MODULE, "--model_path", str(export.path(DEBUG_PTE)),
            "--inputs", str(export.path(INPUTS)), "--debug_buffer_size", str(size),
            "--etdump_path", str(work / ETDUMP), "--debug_output_path", str(work / DEBUG_OUTPUT)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=dict(env), timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise DebugRunFailed(f"{export.path(DEBUG_PTE)}: the debug run took over {timeout_s:.0f} s", "timeout") from None
    if proc.returncode != 0 or parse_result(proc.stdout) is None:
        cls = load_signatures().classify(stdout=proc.stdout, stderr=proc.stderr, exit_code=proc.returncode)
        raise _failed(export, cls, proc.returncode, proc.stdout, proc.stderr)
    return DebugFiles(work)


def _failed(export: DebugFiles, cls: Classification, code: int | None, stdout: str, stderr: str) -> DebugRunFailed:
    named = cls.signature_ids
    cause = "runtime-error" if cls.ok else cls.cls
    what = f"{cause}, {', '.join(named)}" if named else cause
    hint = f" ({cls.hint})" if cls.hint else ""
    return DebugRunFailed(f"{export.path(DEBUG_PTE)}: the debug run failed ({what}; exit {code}): "
                          f"{_runner_said(stdout, stderr)}{hint}", cause, tuple(named))


@dataclass(frozen=True)
class DeviceDebugRun:
    """What a device run did: the pulled files and what the push sent (0 files when unchanged)."""

    files: DebugFiles
    push: SyncResult
    buffer_bytes: int


def _raw_inputs(export: DebugFiles, work: Path, set_dir: str) -> list[ArtifactFile]:
    """The representative inputs as the runner reads them (raw bytes, one file per input, an input
    list naming them by their device paths), written only when their bytes change (so the hash
    cache knows them and the push sends nothing new)."""
    import numpy as np

    folder = work / "inputs"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with np.load(export.path(INPUTS)) as npz:
            arrays = [np.ascontiguousarray(npz[f"input_{i}"]) for i in range(len(npz.files))]
    except (OSError, ValueError, KeyError) as exc:
        raise ArtifactError(f"{export.path(INPUTS)}: unreadable ({exc}); rebuild the debug build") from None
    names = [f"input_{i}.raw" for i in range(len(arrays))]
    blobs = {n: a.tobytes() for n, a in zip(names, arrays)}
    blobs[INPUT_LIST] = (" ".join(posixpath.join(set_dir, n) for n in names) + "\n").encode()
    out = []
    for name, data in blobs.items():
        path = folder / name
        if not path.is_file() or path.read_bytes() != data:
            write_atomic(path, data)
        out.append(ArtifactFile(name, path, len(data), 0o644))
    return out


def _set_name(export: DebugFiles) -> str:
    """One device set per debug build (its folder on this host), reused run after run."""
    where = hashlib.sha256(str(export.folder.resolve()).encode()).hexdigest()[:10]
    return safe_name(f"debug-{export.folder.parent.name}-{export.folder.name}-{where}")


def push_debug_set(export: DebugFiles, work: Path, transport: Transport) -> SyncResult:
    """The debug .pte, its raw inputs and their input list as one device set (incremental: what the
    device holds already, in this set or any other, is not sent again)."""
    name = _set_name(export)
    set_dir = DeviceLayout(transport.device.work_dir, "model", name).set_dir
    pte = export.path(DEBUG_PTE)
    files = [ArtifactFile(DEBUG_PTE, pte, pte.stat().st_size, 0o644), *_raw_inputs(export, work, set_dir)]
    return sync_set(transport, files, kind="model", name=name, cache=default_cache(),
                    meta={"kind": "localize-debug", "source": str(export.folder)})


def run_on_device(export: DebugFiles, work: Path, transport: Transport, runtime: ProvisionedRuntime,
                  workspace: str, timeout_s: float = 600.0, signatures: SignatureSet | None = None) -> DeviceDebugRun:
    """The debug program through `qnn_executor_runner` of the provisioned runtime on the device."""
    export.require_build()
    _copy_compared(export, work)
    size = debug_buffer_size(export.encodings())
    pushed = push_debug_set(export, work, transport)
    set_dir = pushed.remote_dir
    ws = posixpath.join(workspace, f"localize-{uuid.uuid4().hex[:8]}")
    etdump, debug = posixpath.join(ws, ETDUMP), posixpath.join(ws, DEBUG_OUTPUT)
    argv = [posixpath.join(runtime.remote_dir, EXECUTOR_NAME), "--model_path", posixpath.join(set_dir, DEBUG_PTE),
            "--output_folder_path", posixpath.join(ws, "outputs"), "--input_list_path",
            posixpath.join(set_dir, INPUT_LIST), "--etdump_path", etdump, "--dump_intermediate_outputs",
            "--debug_output_path", debug, "--debug_buffer_size", str(size), "--method_index", "0", "--iteration", "1"]
    signatures = signatures or load_signatures()
    try:
        transport.makedirs(posixpath.join(ws, "outputs"))
        res = transport.shell(argv, timeout=timeout_s, cwd=ws, env=runtime.env())
        cls = signatures.classify(stdout=res.stdout, stderr=res.stderr, exit_code=res.exit_code,
                                  timed_out=res.timed_out)
        if not cls.ok or res.exit_code != 0:
            raise _failed(export, cls, res.exit_code, res.stdout, res.stderr)
        for remote, local in ((etdump, work / ETDUMP), (debug, work / DEBUG_OUTPUT)):
            if not transport.exists(remote):
                raise DebugRunFailed(f"{export.path(DEBUG_PTE)}: {EXECUTOR_NAME} exited 0 and wrote no {remote} "
                                     f"({_runner_said(res.stdout, res.stderr)})")
            transport.pull(remote, local)
    except (TransportError, HarnessError) as exc:
        if isinstance(exc, DebugRunFailed):
            raise
        raise DebugRunFailed(f"{export.path(DEBUG_PTE)}: the debug run on {transport.device.name}: {exc}",
                             "transport-error") from None
    finally:
        try:
            transport.remove(ws, recursive=True)
        except (TransportError, HarnessError):
            pass  # a leftover run folder is harmless
    return DeviceDebugRun(DebugFiles(work), pushed, size)
