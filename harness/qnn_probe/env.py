"""The environment of a child process that runs ExecuTorch's QNN backend on the host.

Interim: qnnlib's `harness/qnn/host.py` (`find_host_qnn().child_env(base)`) replaces this once it
is on main. The facts (docs/qnn-arch-limits.md#the-probes-environment): ExecuTorch's QNN AOT adaptor and runtime
dlopen libQnnHtp.so / libQnnSystem.so through the loader path, which the loader reads only at
process start, so QNN work runs in a child whose QNN_SDK_ROOT names a folder with
lib/x86_64-linux-clang/ holding the onnxruntime-qnn wheel's QAIRT libraries and their libc++
copies, and whose LD_LIBRARY_PATH starts with that folder. The user's environment is not changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

_LIB_SUBDIR = Path("lib") / "x86_64-linux-clang"
_BUILD = re.compile(rb"v2\.\d{1,3}\.\d{1,3}\.\d{12}")


@dataclass(frozen=True)
class ProbeQnn:
    sdk_root: Path  # QNN_SDK_ROOT for the child

    @property
    def lib_dir(self) -> Path:
        return self.sdk_root / _LIB_SUBDIR

    def qairt_build(self) -> str | None:
        """The build string the library carries (`v2.49.40.260810104044`), or None."""
        try:
            data = (self.lib_dir / "libQnnHtp.so").read_bytes()
        except OSError:
            return None
        m = _BUILD.search(data)
        return m.group(0).decode() if m else None

    def qairt_version(self) -> str | None:
        build = self.qairt_build()
        return build[1:].rsplit(".", 1)[0] if build else None

    def child_env(self, base: Mapping[str, str]) -> dict[str, str]:
        env = dict(base)
        ld = env.get("LD_LIBRARY_PATH", "")
        env["QNN_SDK_ROOT"] = str(self.sdk_root)
        env["LD_LIBRARY_PATH"] = str(self.lib_dir) + (":" + ld if ld else "")
        return env


def _wheel_site() -> Path:
    spec = importlib.util.find_spec("onnxruntime_qnn")
    if spec is None or spec.origin is None:
        raise HarnessError("no host QNN libraries: set QNN_SDK_ROOT to a folder whose lib/x86_64-linux-clang/ "
                           "holds libQnnHtp.so, or pip install 'onnxruntime-qnn==2.5.0'")
    return Path(spec.origin).parent.parent


def _link_wheel(site: Path) -> Path:
    """A folder of symlinks laid out as an SDK root (in the temp dir, never beside the wheel)."""
    tag = hashlib.sha1(str(site.resolve()).encode()).hexdigest()[:8]
    root = Path(tempfile.gettempdir()) / f"harness-qnn-probe-{os.getuid()}-{tag}"
    lib = root / _LIB_SUBDIR
    lib.mkdir(parents=True, exist_ok=True)
    sources = list((site / "onnxruntime_qnn").glob("*.so")) + list((site / "onnxruntime_qnn.libs").glob("*"))
    if not any(s.name == "libQnnHtp.so" for s in sources):
        raise HarnessError(f"{site}/onnxruntime_qnn: no libQnnHtp.so; reinstall 'onnxruntime-qnn==2.5.0'")
    for src in sources:
        dst = lib / src.name
        if dst.is_symlink() and Path(os.readlink(dst)) == src.resolve():
            continue
        tmp = lib / f".{src.name}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(src.resolve())
        tmp.replace(dst)  # atomic: a parallel probe never sees a missing library
    return root


def find_probe_qnn(sdk_root: str | os.PathLike[str] | None = None) -> ProbeQnn:
    """--qnn-sdk, else $QNN_SDK_ROOT, else the installed onnxruntime-qnn wheel."""
    root = sdk_root or os.environ.get("QNN_SDK_ROOT")
    if root:
        found = ProbeQnn(Path(root).resolve())
        if not (found.lib_dir / "libQnnHtp.so").is_file():
            raise HarnessError(f"{root}: no {_LIB_SUBDIR}/libQnnHtp.so; point --qnn-sdk/QNN_SDK_ROOT at a QAIRT root")
        return found
    return ProbeQnn(_link_wheel(_wheel_site()))
