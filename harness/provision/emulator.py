"""The runtime of an emulated HTP device (`htp: emulator`, a local device): ExecuTorch's runners
on the host, with the host's x86 QAIRT libraries in the place of the Android ones
(docs/executorch-runner.md#the-htp-emulator).

Nothing of QAIRT is copied: the libraries stay where the `qnn` extra installed them (or where
`--qnn-sdk` / $QNN_SDK_ROOT points) and reach the runner's process only through its
environment (`ProvisionedRuntime.env_extra`: QNN_SDK_ROOT and LD_LIBRARY_PATH, read by the
loader at process start); the harness's own environment and the user's are never changed.
The host QNN is found before anything runs, and an ExecuTorch/QAIRT pairing that cannot work
is refused then, naming both versions and the fix.
"""

from __future__ import annotations

import importlib.util
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import ProvisionError
from harness.hostrt.executorch import make_runtime_dir
from harness.provision.types import ProvisionedRuntime
from harness.transport.base import Transport

# ExecuTorch 1.5.1 creates the HTP device with QNN 2.37's device-config layout; of the
# QAIRT releases on PyPI only 2.49.40 (onnxruntime-qnn 2.5.0) accepts it
# (docs/executorch-runner.md#the-htp-emulator).
_WORKS_WITH = {"1.5.1": "2.49.40"}
_BUILD = re.compile(rb"v(2\.\d{1,3}\.\d{1,3})\.\d{12}")
X86_LIBS = "lib/x86_64-linux-clang"


@dataclass(frozen=True)
class HostQnn:
    """Stand-in until harness/qnn/host.py lands: where the host's x86 QAIRT libraries are."""

    lib_dir: Path
    sdk_root: Path | None
    qairt_build: str | None
    qairt_version: str | None
    source: str

    def child_env(self, base: Mapping[str, str]) -> dict[str, str]:
        env = dict(base)
        dirs = [str(self.lib_dir)] + [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
        env["LD_LIBRARY_PATH"] = ":".join(dict.fromkeys(dirs))
        if self.sdk_root is not None:
            env["QNN_SDK_ROOT"] = str(self.sdk_root)
        return env


def _read_build(lib: Path) -> tuple[str | None, str | None]:
    try:
        m = _BUILD.search(lib.read_bytes())  # the build string QAIRT embeds in the library
    except OSError:
        return None, None
    return (m.group(0).decode(), m.group(1).decode()) if m else (None, None)


def find_host_qnn(qnn_sdk: Path | None = None, environ: Mapping[str, str] = os.environ) -> HostQnn:
    root = qnn_sdk or (Path(environ["QNN_SDK_ROOT"]) if environ.get("QNN_SDK_ROOT") else None)
    if root is not None:
        lib_dir, source = root / X86_LIBS, "--qnn-sdk" if qnn_sdk else "$QNN_SDK_ROOT"
    else:
        spec = importlib.util.find_spec("onnxruntime_qnn")
        if spec is None or not spec.origin:
            raise ProvisionError("the host's QNN libraries were not found: an emulated HTP runs on QAIRT's x86 "
                                 "libraries; pip install 'harness[qnn]' (onnxruntime-qnn==2.5.0), or pass "
                                 f"--qnn-sdk / set QNN_SDK_ROOT to a folder whose {X86_LIBS}/ holds libQnnHtp.so")
        lib_dir, source = Path(spec.origin).parent, "onnxruntime-qnn"
    if not (lib_dir / "libQnnHtp.so").is_file():
        raise ProvisionError(f"{lib_dir}: no libQnnHtp.so (from {source}); point --qnn-sdk / QNN_SDK_ROOT at a "
                             f"folder whose {X86_LIBS}/ holds QAIRT's x86 libraries, or pip install 'harness[qnn]'")
    build, version = _read_build(lib_dir / "libQnnHtp.so")
    return HostQnn(lib_dir, root, build, version, source)


def check_executorch_pairing(host: HostQnn, executorch_version: str | None) -> None:
    need = _WORKS_WITH.get(executorch_version or "")
    if need and host.qairt_version and host.qairt_version != need:
        raise ProvisionError(f"ExecuTorch {executorch_version} cannot create the HTP device with QAIRT "
                             f"{host.qairt_version} ({host.lib_dir}): it needs QAIRT {need}; "
                             "pip install onnxruntime-qnn==2.5.0, or point --qnn-sdk at a QAIRT 2.49.40")


def _executorch_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("executorch")
    except PackageNotFoundError:
        return None


def provision_emulator_runtime(transport: Transport, *, qnn_sdk: Path | None = None,
                               environ: Mapping[str, str] = os.environ) -> ProvisionedRuntime:
    """ExecuTorch's host runners for `transport.device` (an `htp: emulator` device), with the
    host QNN on their loader path. ProvisionError before anything runs when the host QNN is
    missing or its QAIRT cannot pair with the installed ExecuTorch."""
    from harness.provision.runtime import provision_runtime

    device = transport.device
    if not device.emulated:
        raise ProvisionError(f"{device.name} is not an emulated HTP (`htp: emulator` in devices.yaml)")
    host = find_host_qnn(qnn_sdk, environ)
    check_executorch_pairing(host, _executorch_version())
    with tempfile.TemporaryDirectory(prefix="harness-et-emu-") as scratch:
        runtime = provision_runtime(transport, make_runtime_dir(Path(scratch)), need_qnn=False,
                                    name=f"executorch-emulator-{device.htp_arch}")
    # Only the two keys the child needs; the user's own loader path stays behind QAIRT's.
    env = host.child_env(environ)
    extra = {k: env[k] for k in ("QNN_SDK_ROOT", "LD_LIBRARY_PATH") if k in env}
    return replace(runtime, htp_arch=device.htp_arch, qnn=True, env_extra=tuple(sorted(extra.items())))


__all__ = ["HostQnn", "check_executorch_pairing", "find_host_qnn", "provision_emulator_runtime"]
