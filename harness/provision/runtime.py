"""Runtime bundles: the runner binary, the shared libraries it needs, and the QNN libraries
for the device's HTP arch (docs/qnn-libraries.md, docs/runtimes.md).

The folder may be a build tree: the runner's libraries are found by ELF NEEDED names anywhere
under it (express/libMNN_Express.so) and land flat beside the runner; names the folder lacks
must be system libraries of the device (checked before a byte moves). The CPU backend needs
no QNN library: they are required only when a QNN pair will run.

QNN libraries are looked up, in order, in the QNN SDK layout of `qnn_sdk`
(`lib/aarch64-android/`, `lib/hexagon-v<arch>/unsigned/`), then in the runtime folder itself
(flat, or in that same SDK layout), then under $QNN_SDK_ROOT. Every missing library is named
in one error, with the places searched.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ArtifactError, ProvisionError
from harness.inventory import DeviceSpec
from harness.provision.elf import OFF_CPU_MACHINES, abi_of, device_abis, is_elf, read_elf, read_machine, system_lib_dirs
from harness.provision.hashcache import HashCache, default_cache
from harness.provision.layout import DeviceLayout, safe_name
from harness.provision.preflight import remember_runtime_manifests
from harness.provision.progress import Progress, make_progress
from harness.provision.setfiles import ArtifactFile, list_files
from harness.provision.sync import SyncResult, sync_set
from harness.provision.types import ProvisionedRuntime
from harness.qnn import scan_qairt_build
from harness.transport import RunsAndMovesFiles, Transport

_ARCH_LIB = re.compile(r"^libQnnHtpV(\d+)(Stub|Skel)\.so$")
# Where Android looks for DSP skeletons besides ours (Qualcomm's ADSP_LIBRARY_PATH default).
SYSTEM_ADSP_DIRS = ("/vendor/lib/rfsa/adsp", "/vendor/dsp/cdsp", "/dsp")


@dataclass(frozen=True)
class RunnerSpec:
    name: str
    qnn_libs: tuple[str, ...]  # from the QNN SDK; {a} = arch number
    own_libs: tuple[str, ...] = ()  # built with the runner (looked up in the runtime folder only)
    # Tools built beside the runner that the harness uses when they are there (never required):
    # MNN's llm_logits_diff for teacher-forced agreement (docs/logits-diff.md).
    companions: tuple[str, ...] = ()


RUNNERS: dict[str, RunnerSpec] = {
    # MNN links QNN into libMNN.so and dlopens libQnnHtp.so + libQnnSystem.so; the Stub and
    # Skel are loaded by libQnnHtp. libQnnHtpPrepare.so is for online mode only.
    "llm_demo": RunnerSpec("llm_demo", ("libQnnHtp.so", "libQnnHtpV{a}Stub.so", "libQnnHtpV{a}Skel.so",
                                        "libQnnSystem.so"), companions=("llm_logits_diff",)),
    # ExecuTorch's SimpleADB.push list (export_utils.py).
    "qnn_llama_runner": RunnerSpec("qnn_llama_runner",
                                   ("libQnnHtp.so", "libQnnHtpV{a}Stub.so", "libQnnHtpV{a}Skel.so",
                                    "libQnnHtpPrepare.so", "libQnnSystem.so"),
                                   own_libs=("libqnn_executorch_backend.so",)),
}


# Build-system files a build tree holds beside the binaries; never pushed (non-ELF runners
# take the top of the folder, minus these).
BUILD_SYSTEM_NAMES = frozenset({"CMakeCache.txt", "Makefile", "cmake_install.cmake", "CTestTestfile.cmake",
                                "build.ninja", "rules.ninja", "compile_commands.json", ".ninja_log", ".ninja_deps",
                                "install_manifest.txt"})
BUILD_SYSTEM_SUFFIXES = (".cmake", ".o", ".a", ".make", ".ninja")
_SKIP_DIRS = ("CMakeFiles",)


@dataclass(frozen=True)
class RuntimeBundle:
    source: Path
    runner: str
    htp_arch: str  # "" when no QNN library is part of the bundle
    files: tuple[ArtifactFile, ...]  # flat: every file lands in one device folder
    qnn: bool = False  # the QNN libraries for htp_arch are in `files`
    # NEEDED sonames found nowhere under the folder: the device's system must provide them.
    system_needed: dict[str, str] = field(default_factory=dict)  # soname -> the file that needs it
    system_dirs: tuple[str, ...] = ()  # where the device's linker looks for them
    # ELF files that run on the device's CPU (not the DSP's skeletons): name -> (ABI, local path).
    cpu_abis: dict[str, tuple[str, Path]] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @functools.cached_property  # a scan of the library's bytes: once per bundle
    def qairt_build(self) -> str | None:
        """The QAIRT build the bundle's libQnnHtp.so names (read from its bytes: a device's library
        cannot be loaded here), if any; context binaries from a newer QAIRT are refused
        (provision.artifacts.check_qairt)."""
        htp = next((f for f in self.files if f.rel == "libQnnHtp.so"), None) if self.qnn else None
        return scan_qairt_build(htp.path) if htp is not None else None


def _sdk_candidates(lib: str, arch_num: int, roots: list[Path]) -> list[Path]:
    sub = f"lib/hexagon-v{arch_num}/unsigned" if lib.endswith("Skel.so") else "lib/aarch64-android"
    return [r / sub / lib for r in roots]


def _is_build_file(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name in BUILD_SYSTEM_NAMES or name.endswith(BUILD_SYSTEM_SUFFIXES)


def _tree_files(src: Path) -> list[ArtifactFile]:
    return [f for f in list_files(src) if not any(part in _SKIP_DIRS for part in f.rel.split("/")[:-1])]


def _find_runner(src: Path, files: list[ArtifactFile], runner: str | None) -> tuple[str, ArtifactFile]:
    """The runner binary: at the top of the folder, else the shallowest one in the tree."""
    names = [runner] if runner else list(RUNNERS)
    if runner is not None and runner not in RUNNERS:
        raise ArtifactError(f"unknown runner {runner!r}; known: {', '.join(RUNNERS)}")
    found: dict[str, ArtifactFile] = {}
    for f in sorted(files, key=lambda f: (f.rel.count("/"), f.rel)):
        base = f.rel.rsplit("/", 1)[-1]
        if base in names and base not in found:
            found[base] = f
    if not found:
        if runner is not None:
            raise ArtifactError(f"{src}: the runner binary {runner} is missing; copy it from the build output")
        raise ArtifactError(f"{src}: no runner binary ({' or '.join(RUNNERS)}) in this folder; "
                            "pass the build output folder of the runner")
    if len(found) > 1:
        raise ArtifactError(f"{src}: holds both {' and '.join(found)}; say which one with runner=")
    return next(iter(found.items()))


def _needed_closure(src: Path, roots: list[ArtifactFile], by_name: dict[str, ArtifactFile],
                    ) -> tuple[dict[str, ArtifactFile], dict[str, str], tuple[str, ...]]:
    """Follow DT_NEEDED from the roots through libraries found anywhere under the folder.
    Returns (soname -> file), (soname -> who needs it) for names the folder lacks, and the
    system folders of the runner's platform."""
    libs: dict[str, ArtifactFile] = {}
    system: dict[str, str] = {}
    dirs: tuple[str, ...] = ()
    todo = list(roots)
    optional = {f.path for f in roots[1:]}  # top-level extras: a stand-in library may be no real ELF
    seen: set[Path] = set()
    while todo:
        f = todo.pop(0)
        if f.path in seen or not is_elf(f.path):
            continue
        seen.add(f.path)
        try:
            info = read_elf(f.path)
        except ArtifactError:
            if f.path in optional:
                continue
            raise
        if not dirs and info.interpreter:
            dirs = system_lib_dirs(info)
        for soname in info.needed:
            if soname in libs or soname in system:
                continue
            hit = by_name.get(soname)
            if hit is None:
                system[soname] = f.rel
            else:
                libs[soname] = hit
                todo.append(hit)
    return libs, system, dirs


def resolve_runtime(
    runtime_source: Path | str,
    htp_arch: str | None,
    *,
    runner: str | None = None,
    qnn_sdk: Path | str | None = None,
    need_qnn: bool = True,
    online_prepare: bool = False,
    env: dict[str, str] | None = None,
    qnn_sdk_option: str = "--qnn-sdk",
) -> RuntimeBundle:
    """Pick the files of a runtime bundle. Raises ArtifactError naming every gap.

    The runner may sit in a build tree: its shared libraries are found by their ELF NEEDED
    names anywhere under the folder and land flat beside it; build-system files never go.
    QNN libraries for `htp_arch` are taken when found (the SDK, the folder, $QNN_SDK_ROOT when
    needed) and required only with `need_qnn` (a QNN pair is selected and the export has one).
    `qnn_sdk_option` is how the user passes the SDK at this front door, for the message."""
    src = Path(runtime_source).expanduser()
    if not src.is_dir():
        raise ArtifactError(f"{src}: runtime folder not found; pass the folder holding llm_demo or "
                            "qnn_llama_runner and its libraries")
    src = src.resolve()
    arch_num = int(htp_arch.lstrip("vV")) if htp_arch else None
    if need_qnn and arch_num is None:
        raise ArtifactError(f"{src}: QNN libraries were asked for a device without an HTP (soc: host); "
                            "select the CPU backend there")
    files = _tree_files(src)
    runner, runner_file = _find_runner(src, files, runner)
    spec = RUNNERS[runner]
    chosen, system, sys_dirs = _runner_files(src, files, runner_file, spec)
    for name in list(chosen):
        m = _ARCH_LIB.match(name)
        if m and (arch_num is None or int(m.group(1)) != arch_num):
            del chosen[name]  # HTP libraries for another arch (a folder may carry several)

    sdk_roots = _sdk_roots(qnn_sdk, qnn_sdk_option)
    env = dict(os.environ if env is None else env)
    later_roots = ([Path(env["QNN_SDK_ROOT"])] if env.get("QNN_SDK_ROOT") and not sdk_roots and need_qnn else [])
    missing: list[str] = []
    searched: list[str] = []
    if arch_num is not None:
        found, missing, searched = _qnn_libraries(src, spec, arch_num, online_prepare, sdk_roots, later_roots)
        chosen.update(found)
    qnn = arch_num is not None and not missing
    own_missing = [lib for lib in spec.own_libs if lib not in chosen]
    if need_qnn and (missing or own_missing):
        raise _qnn_missing_error(src, runner, htp_arch, missing + own_missing, searched, qnn_sdk_option)
    if not qnn:
        for lib in [lib.format(a=arch_num or 0) for lib in spec.qnn_libs]:
            chosen.pop(lib, None)  # a partial set of QNN libraries is no QNN runtime
    chosen[runner] = ArtifactFile(runner, runner_file.path, runner_file.size, runner_file.mode | 0o755)
    return RuntimeBundle(source=src, runner=runner, htp_arch=f"v{arch_num}" if qnn else "",
                         files=tuple(sorted(chosen.values(), key=lambda f: f.rel)), qnn=qnn,
                         system_needed=system, system_dirs=sys_dirs, cpu_abis=_cpu_abis(chosen, runner))


def _runner_files(src: Path, files: list[ArtifactFile], runner_file: ArtifactFile, spec: RunnerSpec,
                  ) -> tuple[dict[str, ArtifactFile], dict[str, str], tuple[str, ...]]:
    """What goes beside the runner (device name -> file), the NEEDED names the folder lacks
    (the device's system must have them) and the system folders the runner's loader reads."""
    by_name: dict[str, ArtifactFile] = {}
    for f in sorted(files, key=lambda f: (f.rel.count("/"), f.rel)):
        by_name.setdefault(f.rel.rsplit("/", 1)[-1], f)
    top = [f for f in files if "/" not in f.rel and not _is_build_file(f.rel) and f is not runner_file]
    chosen: dict[str, ArtifactFile] = {}
    if not is_elf(runner_file.path):
        # A script runner (the virtual lab's): the top of the folder is the runtime.
        return {f.rel: f for f in top}, {}, ()
    # Companion tools (shallowest copy in the tree) land flat beside the runner, with their
    # NEEDED libraries; top-level shared libraries go too: runners dlopen some (QNN, MNN backends).
    companions = [by_name[c] for c in spec.companions if c in by_name and is_elf(by_name[c].path)]
    for f in companions:
        chosen[f.rel.rsplit("/", 1)[-1]] = ArtifactFile(f.rel.rsplit("/", 1)[-1], f.path, f.size, f.mode | 0o755)
    roots = [runner_file, *companions] + [f for f in top if ".so" in f.rel and f not in companions]
    for f in roots[1 + len(companions):]:
        chosen[f.rel] = f
    libs, system, sys_dirs = _needed_closure(src, roots, by_name)
    for soname, f in libs.items():
        chosen[soname] = ArtifactFile(soname, f.path, f.size, f.mode)
    return chosen, system, sys_dirs


def _sdk_roots(qnn_sdk: Path | str | None, qnn_sdk_option: str) -> list[Path]:
    """The QNN SDK the user named (checked to exist), searched first."""
    roots = [Path(qnn_sdk).expanduser()] if qnn_sdk else []
    for r in roots:
        if not r.is_dir():
            raise ArtifactError(f"{r}: QNN SDK folder not found; pass the SDK root (the folder holding lib/) "
                                f"with {qnn_sdk_option}")
    return roots


def _qnn_libraries(src: Path, spec: RunnerSpec, arch_num: int, online_prepare: bool, sdk_roots: list[Path],
                   later_roots: list[Path]) -> tuple[dict[str, ArtifactFile], list[str], list[str]]:
    """The runner's QNN libraries for the arch: found (name -> file), missing, and the folders
    searched for the last one missing (the SDK, the folder, its SDK layout, $QNN_SDK_ROOT)."""
    wanted = [lib.format(a=arch_num) for lib in spec.qnn_libs]
    if online_prepare and "libQnnHtpPrepare.so" not in wanted:
        wanted.append("libQnnHtpPrepare.so")
    found: dict[str, ArtifactFile] = {}
    missing: list[str] = []
    searched: list[str] = []
    for lib in wanted:
        candidates = (_sdk_candidates(lib, arch_num, sdk_roots) + [src / lib]
                      + _sdk_candidates(lib, arch_num, [src]) + _sdk_candidates(lib, arch_num, later_roots))
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is None:
            missing.append(lib)
            searched = [str(c.parent) for c in candidates]
            continue
        found[lib] = ArtifactFile(lib, hit.resolve(), hit.stat().st_size, 0o755)
    return found, missing, searched


def _qnn_missing_error(src: Path, runner: str, htp_arch: str | None, missing: list[str], searched: list[str],
                       qnn_sdk_option: str) -> ArtifactError:
    other = sorted({m.group(0) for f in src.iterdir() if (m := _ARCH_LIB.match(f.name))})
    hint = f" (the folder has {', '.join(other)}: libraries for another HTP arch)" if other else ""
    where = ", ".join(dict.fromkeys(searched)) or str(src)
    return ArtifactError(f"runtime for {runner} on HTP {htp_arch} is missing {', '.join(missing)}; "
                         f"searched {where}{hint}. Pass {qnn_sdk_option} (the QNN SDK root) or copy them into "
                         f"{src}. The CPU backend needs no QNN library")


def _cpu_abis(chosen: dict[str, ArtifactFile], runner: str) -> dict[str, tuple[str, Path]]:
    """The ABI of every ELF file of the bundle that runs on the CPU. A top-level file with ELF
    magic but no readable header (a stand-in) is left to the loader, as _needed_closure does."""
    out: dict[str, tuple[str, Path]] = {}
    for name, f in sorted(chosen.items()):
        if not is_elf(f.path):
            continue
        try:
            machine, elf_class = read_machine(f.path)
        except ArtifactError:
            if name == runner:
                raise
            continue
        if machine not in OFF_CPU_MACHINES:
            out[name] = (abi_of(machine, elf_class), f.path)
    return out


# One round trip: the ABIs the device runs (marker lines start with "@"), then which of the
# argv paths exist (absolute paths, one a line). Fixed text; the paths are whole argv elements.
_DEVICE_SCRIPT = ('if command -v getprop >/dev/null 2>&1; then echo "@abilist=$(getprop ro.product.cpu.abilist)"; '
                  'echo "@abi=$(getprop ro.product.cpu.abi)"; fi; echo "@uname=$(uname -m 2>/dev/null)"; '
                  'for f in "$@"; do [ -e "$f" ] && echo "$f"; done; exit 0')


def check_device_fit(transport: RunsAndMovesFiles, bundle: RuntimeBundle) -> None:
    """Before a byte moves: every ELF file of the bundle is built for an ABI the device runs
    (ProvisionError naming the file, its ABI and the device's: an x86-64 llm_demo is never
    pushed to an arm64 phone), and every NEEDED library the bundle does not carry is in the
    device's system folders (ArtifactError: the run would die in the loader)."""
    if not bundle.system_needed and not bundle.cpu_abis:
        return
    paths = {name: [posixpath.join(d, name) for d in bundle.system_dirs] for name in bundle.system_needed}
    # Asked through the device's shell, not its file protocol: the shell sees what the runner
    # will see (a sandbox or chroot may show the file protocol another tree).
    res = transport.quick(["sh", "-c", _DEVICE_SCRIPT, "sh", *[p for ps in paths.values() for p in ps]],
                          timeout=60, check=False)
    marks = dict(line[1:].split("=", 1) for line in res.stdout.split("\n") if line.startswith("@") and "=" in line)
    runs = device_abis(marks.get("abilist", ""), marks.get("abi", ""), marks.get("uname", ""))
    wrong = [(name, abi, path) for name, (abi, path) in bundle.cpu_abis.items() if runs and abi not in runs]
    if wrong:
        said = "ro.product.cpu.abilist" if marks.get("abilist") or marks.get("abi") else "uname -m"
        files = "; ".join(f"{path} is built for {abi}" for _, abi, path in wrong[:4])
        more = f" (and {len(wrong) - 4} more)" if len(wrong) > 4 else ""
        raise ProvisionError(f"{files}{more}, but {transport.device.name} runs {', '.join(runs)} ({said}); "
                             f"nothing was pushed. Build {bundle.runner} and its libraries for the device "
                             "(for a phone: an Android NDK build with ANDROID_ABI=arm64-v8a) or pass that build's "
                             "folder")
    if not bundle.system_needed:
        return
    found = set(res.stdout.split("\n"))
    absent = [name for name, ps in paths.items() if not any(p in found for p in ps)]
    if absent:
        detail = "; ".join(f"{n} (needed by {bundle.system_needed[n]})" for n in absent)
        raise ArtifactError(f"{bundle.source}: {transport.device.name} lacks shared libraries {bundle.runner} needs: "
                            f"{detail}. Found neither under {bundle.source} nor in the device's "
                            f"{', '.join(bundle.system_dirs)}; copy them into the runtime folder (any subfolder)")


def _runtime_meta(bundle: RuntimeBundle, device: DeviceSpec, emulated_qairt: str | None) -> dict[str, object]:
    if emulated_qairt:  # the runner's QNN is the host's x86 QAIRT, on the device's emulated HTP
        return {"runner": bundle.runner, "htp_arch": f"{device.htp_arch} emulator", "qnn": True,
                "qairt_build": emulated_qairt, "source": str(bundle.source)}
    meta: dict[str, object] = {"runner": bundle.runner, "htp_arch": bundle.htp_arch or "cpu-only", "qnn": bundle.qnn,
                               "source": str(bundle.source)}
    if bundle.qnn and bundle.qairt_build:
        meta["qairt_build"] = bundle.qairt_build
    return meta


def default_runtime_name(runner: str, htp_arch: str) -> str:
    """`llm_demo-v79` with QNN libraries, `llm_demo-cpu` without."""
    return safe_name(f"{runner}-{htp_arch or 'cpu'}")


def provision_runtime(
    transport: Transport,
    runtime_source: Path | str,
    *,
    qnn_sdk: Path | str | None = None,
    runner: str | None = None,
    name: str | None = None,
    online_prepare: bool = False,
    need_qnn: bool | None = None,
    qnn_sdk_option: str = "--qnn-sdk",
    cache: HashCache | None = None,
    progress: Progress | None = None,
    verify: str = "size",
    emulated_qairt: str | None = None,
) -> ProvisionedRuntime:
    """Push the runner, the libraries it needs and (when found or needed) the QNN libraries
    for the device's HTP arch (incremental, shared blobs). `need_qnn` None: required on a
    device with an HTP, as before; front doors pass whether a QNN pair will run. The manifest
    records the QAIRT build of the QNN libraries (the load preflight's runtime QAIRT for later
    pushes, `harness status`); `emulated_qairt`: the host QAIRT an emulated HTP runs on."""
    device: DeviceSpec = transport.device
    if need_qnn is None:
        need_qnn = device.has_htp
    bundle = resolve_runtime(runtime_source, device.htp_arch or None, runner=runner, qnn_sdk=qnn_sdk,
                             online_prepare=online_prepare, need_qnn=need_qnn, qnn_sdk_option=qnn_sdk_option)
    check_device_fit(transport, bundle)
    set_name = name or default_runtime_name(bundle.runner, bundle.htp_arch)
    result: SyncResult = sync_set(
        transport, bundle.files, kind="runtime", name=set_name,
        meta=_runtime_meta(bundle, device, emulated_qairt),
        cache=cache if cache is not None else default_cache(), progress=progress or make_progress(),
        verify=verify)
    remote = result.remote_dir
    if bundle.qairt_build:  # the next model provision reads its QAIRT in its first round trip
        remember_runtime_manifests(device, [DeviceLayout(device.work_dir, "runtime", safe_name(set_name)).manifest],
                                   add=True)
    return ProvisionedRuntime(
        device=device.name, remote_dir=remote, runner=f"{remote}/{bundle.runner}", lib_dirs=(remote,),
        adsp_dirs=(remote, *SYSTEM_ADSP_DIRS) if bundle.qnn else (), htp_arch=bundle.htp_arch,
        bytes_sent=result.bytes_sent, files_sent=result.files_sent, qnn=bundle.qnn, qairt_build=bundle.qairt_build)


__all__ = ["BUILD_SYSTEM_NAMES", "RUNNERS", "RunnerSpec", "RuntimeBundle", "check_device_fit", "default_runtime_name",
           "provision_runtime", "resolve_runtime"]
