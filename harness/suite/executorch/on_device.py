"""`harness localize --device NAME FOLDER`: a debug build localized where a device computes it
(docs/localize.md#on-a-device). The device is claimed as `harness push` claims it; the debug
program runs on the emulated HTP's pybindings or, on a phone or a board, through the runtime
folder's `qnn_executor_runner` (harness.runners.executorch.localize); the pulled files are
compared on this host as any other run's. The answer: 0 no departure, 1 departed, 2 undecidable
(a damaged build, a run that failed: named with the catalogue's line)."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.checks.localize import REBUILD, DebugFiles, debug_files_for, localize
from harness.errors import HarnessError
from harness.evidence import Localization, Outcome
from harness.inventory import DeviceSpec
from harness.transport import Transport


@dataclass(frozen=True)
class LocalizeRequest:
    folder: Path  # the debug build, or the program folder it sits beside (debug/, the export stage's layout)
    work: Path  # where the run's files are pulled (and compared)
    runtime: Path | None = None  # the ExecuTorch runtime folder (qnn_llama_runner, qnn_executor_runner, libs)
    qnn_sdk: Path | None = None
    fmt: str | None = None
    threshold_db: float | None = None
    timeout_s: float = 600.0


@dataclass
class LocalizeAnswer:
    result: Localization
    facts: dict[str, object] = field(default_factory=dict)  # where it ran, what was pushed, a named failure

    def as_dict(self) -> dict[str, object]:
        return {**self.result.as_dict(), **self.facts}


def _undecidable(reason: str, fmt: str | None, **facts: object) -> LocalizeAnswer:
    return LocalizeAnswer(Localization(Outcome.UNDECIDABLE, 0.0, fmt or "", (), reason=reason), facts)


def _run(device: DeviceSpec, transport: Transport, export: DebugFiles, req: LocalizeRequest,
         ) -> tuple[DebugFiles, dict[str, Any]]:
    from harness.provision import provision_runtime
    from harness.qnn import find_host_qnn
    from harness.runners.executorch import run_debug_program, run_on_device
    from harness.suite.executorch.checks import host_python_env

    if device.emulated:
        env = find_host_qnn(req.qnn_sdk).child_env({**os.environ, **host_python_env()})
        return run_debug_program(export, req.work, env, timeout_s=req.timeout_s), {"ran_on": "emulated HTP"}
    if req.runtime is None:
        raise HarnessError(f"{device.name}: no runtime folder: pass --runtime DIR (qnn_llama_runner, "
                           "qnn_executor_runner and their libraries)")
    rt = provision_runtime(transport, req.runtime, qnn_sdk=req.qnn_sdk, need_qnn=True,
                           qnn_sdk_option="harness localize --qnn-sdk")
    done = run_on_device(export, req.work, transport, rt, posixpath.join(device.work_dir, "et-runs"),
                         timeout_s=req.timeout_s)
    return done.files, {"ran_on": f"{device.name} ({rt.htp_arch}) through {posixpath.basename(rt.runner)}'s "
                                  "runtime folder", "runtime_files_sent": rt.files_sent,
                        "files_sent": done.push.files_sent, "bytes_sent": done.push.bytes_sent,
                        "debug_buffer_size": done.buffer_bytes}


def localize_on_device(device: DeviceSpec, transport: Transport, req: LocalizeRequest, *,
                       keep_stdout: bool) -> LocalizeAnswer:
    """Run the debug build of `req.folder` on the (claimed, opened) device and judge it."""
    from harness.runners.executorch import DebugRunFailed

    export = debug_files_for(req.folder)
    missing = export.missing_build()
    if missing:
        return _undecidable(f"{req.folder}: no debug build here (missing {', '.join(missing)}); {REBUILD}", req.fmt)
    if not device.has_htp:
        return _undecidable(f"{device.name} has no HTP (soc: host): localize on a phone, a board or an emulated HTP",
                            req.fmt)
    try:
        files, facts = _run(device, transport, export, req)
    except DebugRunFailed as exc:
        return _undecidable(str(exc), req.fmt, device=device.name,
                            failure={"class": exc.cls, "catalogue": list(exc.ids)})
    except HarnessError as exc:
        return _undecidable(f"{device.name}: {exc}", req.fmt, device=device.name)
    result = localize(files, req.fmt, req.threshold_db, keep_stdout=keep_stdout)
    return LocalizeAnswer(result, {"device": device.name, "debug_build": str(export.folder),
                                   "work": str(req.work), **facts})
