"""The debug program's run for localization (harness.checks.localize): ExecuTorch's pybindings run
it once with an ETDump and a debug buffer sized from the program (harness.hostrt.executorch.debug),
here on the host's HTP emulator. The export folder is only read; the run's files go to `work`,
beside copies of the two small files the comparison reads (docs/localize.md#files)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping
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
from harness.errors import ArtifactError
from harness.hostrt.executorch import DEBUG_MODULE, parse_result


def run_debug_program(export: DebugFiles, work: Path, env: Mapping[str, str], timeout_s: float = 600.0) -> DebugFiles:
    """A copy-free run: the runner reads the export's program and inputs and writes the ETDump and the
    debug buffer into `work`, beside copies of the ETRecord and the encodings."""
    export.require_build()
    work.mkdir(parents=True, exist_ok=True)
    for name in (ETRECORD, ENCODINGS):
        target = work / name
        if not target.exists():
            shutil.copyfile(export.path(name), target)  # the comparison reads them beside the run
    size = debug_buffer_size(export.encodings())
    argv = [sys.executable, "-m", DEBUG_MODULE, "--model_path", str(export.path(DEBUG_PTE)),
            "--inputs", str(export.path(INPUTS)), "--debug_buffer_size", str(size),
            "--etdump_path", str(work / ETDUMP), "--debug_output_path", str(work / DEBUG_OUTPUT)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(env), timeout=timeout_s, check=False)
    if proc.returncode != 0 or parse_result(proc.stdout) is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ArtifactError(f"{export.path(DEBUG_PTE)}: the debug run failed (exit {proc.returncode}): "
                            + " | ".join(tail))
    return DebugFiles(work)


