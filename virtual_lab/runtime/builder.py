"""Folders the virtual devices run: a runtime (runner programs + fake libraries) and a fake
QNN SDK tree laid out like the real one (`$QNN_SDK_ROOT/lib/aarch64-android`,
`lib/hexagon-vNN/unsigned`), with small contents that differ per library and arch so a
wrong-arch copy is detectable.

The runner programs are tiny Python launchers with a shebang of the host interpreter; they
import `virtual_lab.runtime.*` from this checkout, which the device sandbox binds read-only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from virtual_lab.runtime.devenv import lib_header, repo_root

ARCHES = ("v68", "v69", "v73", "v75", "v79", "v81")
DEFAULT_SDK_VERSION = "2.40.0.251030"
PROGRAMS = {
    # MNN's build puts llm_logits_diff beside llm_demo; provisioning pushes both (every file
    # at the top of the runtime folder), so the harness finds it where llm_demo is.
    "mnn": {"llm_demo": "virtual_lab.runtime.llm_demo", "llm_logits_diff": "virtual_lab.runtime.llm_logits_diff"},
    "executorch": {"qnn_llama_runner": "virtual_lab.runtime.qnn_llama_runner",
                   "qnn_executor_runner": "virtual_lab.runtime.qnn_llama_runner"},
}


def _norm_arch(arch: str | int) -> str:
    a = str(arch).lower()
    a = a if a.startswith("v") else "v" + a
    if a not in ARCHES:
        raise ValueError(f"HTP arch {arch!r} is not one of {', '.join(ARCHES)}")
    return a


def _write_lib(path: Path, name: str, arch: str | None, sdk: str, size: int = 4096) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    head = lib_header(name, arch, sdk)
    seed = sum(name.encode()) + (int(arch[1:]) if arch else 0)
    filler = bytes((seed + i * 31) % 251 for i in range(max(0, size - len(head))))
    path.write_bytes(head + filler)


def qnn_lib_names(arch: str) -> dict[str, str | None]:
    """aarch64-android libraries -> the arch each is specific to (None = any)."""
    n = _norm_arch(arch)[1:]
    return {"libQnnHtp.so": None, "libQnnSystem.so": None, "libQnnHtpPrepare.so": None,
            "libQnnCpu.so": None, f"libQnnHtpV{n}Stub.so": f"v{n}"}


def make_qnn_sdk(dst: Path, arches: tuple[str, ...] | list[str] = ARCHES,
                 version: str = DEFAULT_SDK_VERSION) -> Path:
    """A fake QNN SDK root: lib/aarch64-android/{libQnnHtp,libQnnSystem,libQnnHtpPrepare,
    libQnnCpu,libQnnHtpV<n>Stub}.so and lib/hexagon-v<n>/unsigned/libQnnHtpV<n>Skel.so."""
    dst = Path(dst)
    android = dst / "lib" / "aarch64-android"
    for arch in [_norm_arch(a) for a in arches]:
        for name, lib_arch in qnn_lib_names(arch).items():
            if not (android / name).exists() or lib_arch:
                _write_lib(android / name, name, lib_arch, version)
        skel = f"libQnnHtpV{arch[1:]}Skel.so"
        _write_lib(dst / "lib" / f"hexagon-{arch}" / "unsigned" / skel, skel, arch, version)
    (dst / "sdk.yaml").write_text(f"name: qnn-virtual-lab\nversion: {version}\n", encoding="utf-8")
    return dst


def _launcher(module: str, build: dict) -> str:
    # sys.executable as it is, not its realpath: in a virtual environment the link is what
    # finds the environment's site-packages (the real engine's `mnn` lives there).
    python = os.path.abspath(sys.executable)
    return (
        f"#!{python} -B\n"
        "# Virtual lab runtime program (see virtual_lab/runtime). Build flags below.\n"
        "import sys\n"
        f"sys.path.insert(0, {str(repo_root())!r})\n"
        f"from {module} import main\n"
        f"BUILD = {build!r}\n"
        "sys.exit(main(sys.argv, BUILD))\n"
    )


def make_runtime_dir(dst: Path, arch: str, kind: str = "mnn", *, logcat_only: bool = False,
                     with_qnn_libs: bool = True, sdk_version: str = DEFAULT_SDK_VERSION) -> Path:
    """A runtime folder for one HTP arch: the runner program(s), a fake libMNN.so (mnn) or
    libqnn_executorch_backend.so (executorch) and, by default, the QNN libraries the device
    needs next to the runner (Skel included: put it where ADSP_LIBRARY_PATH points).

    logcat_only=True builds llm_demo "with MNN_USE_LOGCAT": MNN_PRINT lines go to logcat."""
    if kind not in PROGRAMS:
        raise ValueError(f"runtime kind {kind!r} is not one of {', '.join(PROGRAMS)}")
    arch = _norm_arch(arch)
    dst = Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    build = {"kind": kind, "arch": arch, "logcat_only": bool(logcat_only),
             # ExecuTorch's runner is linked with -Wl,-rpath='$ORIGIN' (docs/executorch-runner.md#device-command)
             "rpath_origin": kind == "executorch"}
    for name, module in PROGRAMS[kind].items():
        path = dst / name
        path.write_text(_launcher(module, build), encoding="utf-8")
        path.chmod(0o755)
    if kind == "mnn":
        flags = f"MNN 3.6.1 MNN_QNN=ON MNN_WITH_PLUGIN=ON MNN_USE_LOGCAT={'ON' if logcat_only else 'OFF'}"
        (dst / "libMNN.so").write_bytes(b"\x7fELF virtual lab libMNN.so: " + flags.encode() + b"\n")
    else:
        (dst / "libqnn_executorch_backend.so").write_bytes(b"\x7fELF virtual lab libqnn_executorch_backend.so\n")
    if with_qnn_libs:
        names = qnn_lib_names(arch)
        if kind == "mnn":
            names.pop("libQnnHtpPrepare.so")  # online mode only (docs/qnn-libraries.md#mnn-llm_demo)
        names.pop("libQnnCpu.so")
        for name, lib_arch in names.items():
            _write_lib(dst / name, name, lib_arch, sdk_version)
        skel = f"libQnnHtpV{arch[1:]}Skel.so"
        _write_lib(dst / skel, skel, arch, sdk_version)
    return dst
