"""Runtime bundles: the runner binary, its own libraries, and the QNN libraries for the
device's HTP arch (docs/qnn-libraries.md).

QNN libraries are looked up, in order, in the QNN SDK layout of `qnn_sdk`
(`lib/aarch64-android/`, `lib/hexagon-v<arch>/unsigned/`), then in the runtime folder itself
(flat, or in that same SDK layout), then under $QNN_SDK_ROOT. Every missing library is named
in one error, with the places searched.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ArtifactError
from harness.inventory import DeviceSpec
from harness.provision.artifacts import ArtifactFile, list_files
from harness.provision.hashcache import HashCache, default_cache
from harness.provision.progress import Progress, make_progress
from harness.provision.sync import SyncResult, safe_name, sync_set
from harness.provision.types import ProvisionedRuntime
from harness.transport.base import Transport

_ARCH_LIB = re.compile(r"^libQnnHtpV(\d+)(Stub|Skel)\.so$")
# Where Android looks for DSP skeletons besides ours (Qualcomm's ADSP_LIBRARY_PATH default).
SYSTEM_ADSP_DIRS = ("/vendor/lib/rfsa/adsp", "/vendor/dsp/cdsp", "/dsp")


@dataclass(frozen=True)
class RunnerSpec:
    name: str
    qnn_libs: tuple[str, ...]  # from the QNN SDK; {a} = arch number
    own_libs: tuple[str, ...] = ()  # built with the runner (looked up in the runtime folder only)


RUNNERS: dict[str, RunnerSpec] = {
    # MNN links QNN into libMNN.so and dlopens libQnnHtp.so + libQnnSystem.so; the Stub and
    # Skel are loaded by libQnnHtp. libQnnHtpPrepare.so is for online mode only.
    "llm_demo": RunnerSpec("llm_demo", ("libQnnHtp.so", "libQnnHtpV{a}Stub.so", "libQnnHtpV{a}Skel.so",
                                        "libQnnSystem.so")),
    # ExecuTorch's SimpleADB.push list (export_utils.py).
    "qnn_llama_runner": RunnerSpec("qnn_llama_runner",
                                   ("libQnnHtp.so", "libQnnHtpV{a}Stub.so", "libQnnHtpV{a}Skel.so",
                                    "libQnnHtpPrepare.so", "libQnnSystem.so"),
                                   own_libs=("libqnn_executorch_backend.so",)),
}


@dataclass(frozen=True)
class RuntimeBundle:
    source: Path
    runner: str
    htp_arch: str
    files: tuple[ArtifactFile, ...]  # flat: every file lands in one device folder

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def _sdk_candidates(lib: str, arch_num: int, roots: list[Path]) -> list[Path]:
    sub = f"lib/hexagon-v{arch_num}/unsigned" if lib.endswith("Skel.so") else "lib/aarch64-android"
    return [r / sub / lib for r in roots]


def resolve_runtime(
    runtime_source: Path | str,
    htp_arch: str,
    *,
    runner: str | None = None,
    qnn_sdk: Path | str | None = None,
    online_prepare: bool = False,
    env: dict[str, str] | None = None,
) -> RuntimeBundle:
    """Pick the files of a runtime bundle for an HTP arch. Raises ArtifactError naming every gap."""
    src = Path(runtime_source).expanduser()
    if not src.is_dir():
        raise ArtifactError(f"{src}: runtime folder not found; pass the folder holding llm_demo or "
                            "qnn_llama_runner and its libraries")
    src = src.resolve()
    arch_num = int(htp_arch.lstrip("vV"))
    if runner is None:
        found = [name for name in RUNNERS if (src / name).is_file()]
        if not found:
            raise ArtifactError(f"{src}: no runner binary ({' or '.join(RUNNERS)}) in this folder; "
                                "pass the build output folder of the runner")
        if len(found) > 1:
            raise ArtifactError(f"{src}: holds both {' and '.join(found)}; say which one with runner=")
        runner = found[0]
    if runner not in RUNNERS:
        raise ArtifactError(f"unknown runner {runner!r}; known: {', '.join(RUNNERS)}")
    spec = RUNNERS[runner]
    if not (src / runner).is_file():
        raise ArtifactError(f"{src}: the runner binary {runner} is missing; copy it from the build output")

    env = dict(os.environ if env is None else env)
    sdk_roots = [Path(qnn_sdk).expanduser()] if qnn_sdk else []
    for r in sdk_roots:
        if not r.is_dir():
            raise ArtifactError(f"{r}: QNN SDK folder not found; pass the SDK root (the folder holding lib/)")
    plain_roots = [src]
    later_roots = [Path(env["QNN_SDK_ROOT"])] if env.get("QNN_SDK_ROOT") and not sdk_roots else []

    # The runner's own files: everything at the top of the folder, except HTP libraries for
    # other arches (a plain folder may carry several).
    chosen: dict[str, ArtifactFile] = {}
    for f in list_files(src):
        if "/" in f.rel:
            continue
        m = _ARCH_LIB.match(f.rel)
        if m and int(m.group(1)) != arch_num:
            continue
        chosen[f.rel] = f

    wanted = [lib.format(a=arch_num) for lib in spec.qnn_libs]
    if online_prepare and "libQnnHtpPrepare.so" not in wanted:
        wanted.append("libQnnHtpPrepare.so")
    missing: list[str] = []
    searched: list[str] = []
    for lib in wanted:
        candidates = (_sdk_candidates(lib, arch_num, sdk_roots) + [r / lib for r in plain_roots]
                      + _sdk_candidates(lib, arch_num, plain_roots) + _sdk_candidates(lib, arch_num, later_roots))
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is None:
            missing.append(lib)
            searched = [str(c.parent) for c in candidates]
            continue
        st = hit.stat()
        chosen[lib] = ArtifactFile(lib, hit.resolve(), st.st_size, 0o755)
    for lib in spec.own_libs:
        if lib not in chosen:
            missing.append(lib)
    if missing:
        other = sorted({m.group(0) for f in src.iterdir() if (m := _ARCH_LIB.match(f.name))})
        hint = f" (the folder has {', '.join(other)}: libraries for another HTP arch)" if other else ""
        where = ", ".join(dict.fromkeys(searched)) or str(src)
        raise ArtifactError(f"runtime for {runner} on HTP {htp_arch} is missing {', '.join(missing)}; searched "
                            f"{where}{hint}. Pass qnn_sdk= (the QNN SDK root) or copy them into {src}")
    runner_file = chosen[runner]
    chosen[runner] = ArtifactFile(runner, runner_file.path, runner_file.size, runner_file.mode | 0o755)
    files = tuple(sorted(chosen.values(), key=lambda f: f.rel))
    return RuntimeBundle(source=src, runner=runner, htp_arch=f"v{arch_num}", files=files)


def default_runtime_name(runner: str, htp_arch: str) -> str:
    return safe_name(f"{runner}-{htp_arch}")


def provision_runtime(
    transport: Transport,
    runtime_source: Path | str,
    *,
    qnn_sdk: Path | str | None = None,
    runner: str | None = None,
    name: str | None = None,
    online_prepare: bool = False,
    cache: HashCache | None = None,
    progress: Progress | None = None,
    verify: str = "size",
) -> ProvisionedRuntime:
    """Push the runner and the QNN libraries for the device's HTP arch (incremental, shared blobs)."""
    device: DeviceSpec = transport.device
    bundle = resolve_runtime(runtime_source, device.htp_arch, runner=runner, qnn_sdk=qnn_sdk,
                             online_prepare=online_prepare)
    result: SyncResult = sync_set(
        transport, bundle.files, kind="runtime", name=name or default_runtime_name(bundle.runner, bundle.htp_arch),
        meta={"runner": bundle.runner, "htp_arch": bundle.htp_arch, "source": str(bundle.source)},
        cache=cache if cache is not None else default_cache(), progress=progress or make_progress(),
        verify=verify)
    remote = result.remote_dir
    return ProvisionedRuntime(
        device=device.name, remote_dir=remote, runner=f"{remote}/{bundle.runner}", lib_dirs=(remote,),
        adsp_dirs=(remote, *SYSTEM_ADSP_DIRS), htp_arch=bundle.htp_arch, bytes_sent=result.bytes_sent,
        files_sent=result.files_sent)


__all__ = ["RUNNERS", "RunnerSpec", "RuntimeBundle", "default_runtime_name", "provision_runtime", "resolve_runtime"]
