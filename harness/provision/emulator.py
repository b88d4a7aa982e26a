"""The runtime of an emulated HTP device (`htp: emulator`, a local device): ExecuTorch's runners
on the host, with the host's x86 QAIRT libraries in the place of the Android ones
(docs/executorch-runner.md#the-htp-emulator).

Nothing of QAIRT is copied: the libraries stay where the `qnn` extra installed them (harness/qnn/host.py
lays the wheel out as symlinks) or where `--qnn-sdk` / $QNN_SDK_ROOT points, and reach the
runner's process only through its environment (`ProvisionedRuntime.env_extra`: QNN_SDK_ROOT and LD_LIBRARY_PATH, read by the
loader at process start); the harness's own environment and the user's are never changed.
The host QNN is found before anything runs, and an ExecuTorch/QAIRT pairing that cannot work
is refused then, naming both versions and the fix.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from harness.errors import ProvisionError
from harness.hostrt.executorch import make_runtime_dir
from harness.provision.types import ProvisionedRuntime
from harness.qnn import check_executorch_pairing, find_host_qnn
from harness.transport import Transport


def provision_emulator_runtime(transport: Transport, *, qnn_sdk: Path | None = None,
                               environ: Mapping[str, str] = os.environ) -> ProvisionedRuntime:
    """ExecuTorch's host runners for `transport.device` (an `htp: emulator` device), with the
    host QNN on their loader path (harness/qnn/host.py). Before anything runs: QnnUnavailable
    when the host QNN is missing, QnnAbiMismatch when its QAIRT cannot pair with the installed
    ExecuTorch (both HarnessErrors naming the fix)."""
    from harness.provision.runtime import provision_runtime

    device = transport.device
    if not device.emulated:
        raise ProvisionError(f"{device.name} is not an emulated HTP (`htp: emulator` in devices.yaml)")
    host = find_host_qnn(qnn_sdk, environ)
    check_executorch_pairing(host)
    with tempfile.TemporaryDirectory(prefix="harness-et-emu-") as scratch:
        runtime = provision_runtime(transport, make_runtime_dir(Path(scratch)), need_qnn=False,
                                    name=f"executorch-emulator-{device.htp_arch}", emulated_qairt=host.qairt_build)
    # Only the two keys the child needs; the user's own loader path stays behind QAIRT's.
    env = host.child_env(environ)
    extra = {k: env[k] for k in ("QNN_SDK_ROOT", "LD_LIBRARY_PATH") if k in env}
    return replace(runtime, htp_arch=device.htp_arch, qnn=True, qairt_build=host.qairt_build,
                   env_extra=tuple(sorted(extra.items())))


__all__ = ["provision_emulator_runtime"]
