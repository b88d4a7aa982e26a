"""`qnn_executor_runner --profile_level N` on the host. On a device the level is a runtime backend
option (`QNN_RUNTIME_PROFILE_LEVEL`, set through `BackendOptions` in ExecuTorch's
examples/qualcomm/executor_runner/qnn_executor_runner.cpp) that overrides the level of the program's
QNN compile spec; the pybindings expose no backend options, so here the same override is made in
the program: a copy whose `qnn_compile_spec` (backends/qualcomm/serialization/qc_schema.py
`QnnExecuTorchOptions.profile_level`) carries the level, everything else kept. Levels 1 (basic) and
2 (detailed: per-op cycles) are runtime options on a device; 3 (optrace) needs the lowering."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

QNN_COMPILE_SPEC = "qnn_compile_spec"  # backends/qualcomm/utils/constants.py QCOM_QNN_COMPILE_SPEC
RUNTIME_LEVELS = (0, 1, 2)


def with_profile_level(pte: Path, level: int, folder: Path | None = None) -> Path:
    """A copy of `pte` whose QNN delegates profile at `level` (kept in `folder`, default beside
    `pte`, named by content and level so a second run reuses it)."""
    if level not in RUNTIME_LEVELS:
        raise RuntimeError(f"--profile_level {level}: levels {RUNTIME_LEVELS} are runtime options "
                           "(3, optrace, must be set when the program is lowered)")
    data = pte.read_bytes()
    key = hashlib.sha256(data).hexdigest()[:16]
    out = (folder or pte.parent) / f".{pte.stem}-{key}-profile{level}.pte"
    if out.is_file():
        return out
    from executorch.backends.qualcomm.serialization.qc_schema import QnnExecuTorchProfileLevel
    from executorch.backends.qualcomm.serialization.qc_schema_serialize import (
        flatbuffer_to_option,
        option_to_flatbuffer,
    )
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte_file = deserialize_pte_binary(data)
    changed = 0
    for plan in pte_file.program.execution_plan:
        for delegate in plan.delegates:
            for spec in delegate.compile_specs:
                if spec.key == QNN_COMPILE_SPEC:
                    options = flatbuffer_to_option(spec.value)
                    options.profile_level = QnnExecuTorchProfileLevel(level)
                    spec.value = option_to_flatbuffer(options)
                    changed += 1
    if not changed:
        raise RuntimeError(f"{pte}: no QNN delegate to profile (no {QNN_COMPILE_SPEC} in the program)")
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        serialize_pte_binary(pte_file).write_to_file(fh)
    os.replace(tmp, out)
    return out
