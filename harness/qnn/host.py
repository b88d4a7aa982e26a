"""The host's x86 QAIRT libraries: where they are, which QAIRT they are, and whether the installed
ExecuTorch can drive them (docs/host-qnn.md).

Looked for, in this order: `--qnn-sdk DIR`, then `$QNN_SDK_ROOT`, each of which must hold
lib/x86_64-linux-clang/libQnnHtp.so and libQnnSystem.so; else the installed `onnxruntime-qnn`
wheel (site-packages/onnxruntime_qnn/*.so, their libc++ in onnxruntime_qnn.libs/), laid out as an
SDK-style folder of symlinks in the harness cache (built under a temp name and renamed, so a
half-built folder is never used). The QAIRT version is read from libQnnHtp.so through QNN's own
API (harness.qnn.buildid). Nothing here changes os.environ: `HostQnn.child_env` gives a copy for
child processes (the loader reads LD_LIBRARY_PATH only at process start).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import HarnessError
from harness.hostfiles import child_pythonpath, user_cache_dir, write_atomic

LIB_SUBDIR = Path("lib", "x86_64-linux-clang")
REQUIRED_LIBS = ("libQnnHtp.so", "libQnnSystem.so")
WHEEL_MODULE = "onnxruntime_qnn"
WHEEL_DIST = "onnxruntime-qnn"
INSTALL_HINT = "pip install 'harness[qnn]' (onnxruntime-qnn==2.5.0, QAIRT 2.49.40) or pass --qnn-sdk DIR"
_BUILD_RE = re.compile(rb"v(\d+)\.(\d+)\.(\d+)\.(\d{12})")
_READ_TIMEOUT_S = 60
# Off switch for the automatic use (auto_host_qnn), e.g. where the context binaries are newer
# than the host's QAIRT; find_host_qnn itself ignores it.
HOST_QNN_SWITCH = "HARNESS_HOST_QNN"
_OFF = frozenset({"0", "off", "no", "false"})


class QnnUnavailable(HarnessError):
    """No usable x86 QAIRT library folder on this host (the message lists what was looked at)."""


class QnnAbiMismatch(HarnessError):
    """The installed ExecuTorch cannot drive this QAIRT (measured; docs/host-qnn.md#pairing)."""


class QnnPairingUnverified(UserWarning):
    """An ExecuTorch / QAIRT combination nobody measured: it may work."""


@dataclass(frozen=True)
class HostQnn:
    lib_dir: Path  # <sdk_root>/lib/x86_64-linux-clang: libQnnHtp.so, libQnnSystem.so, ... and libc++
    sdk_root: Path  # what QNN_SDK_ROOT is set to for child processes
    # "v2.49.40.260810104044" when known; None: read from libQnnHtp.so when first asked (`qairt_build`).
    # Lazy because the read costs a child process (~0.6 s) that reading context binaries, the
    # common use (a push's target guard), never needs.
    known_build: str | None
    source: str  # "--qnn-sdk", "$QNN_SDK_ROOT" or "onnxruntime-qnn 2.5.0 wheel"
    known_read_by: str = "QnnInterface backendGetBuildId"  # how known_build was read (docs/host-qnn.md)

    @property
    def qairt_build(self) -> str:
        """The QAIRT build of libQnnHtp.so, as QNN's API reports it (cached per file, on disk too)."""
        return self.known_build if self.known_build is not None else read_qairt_build(self.htp_lib)[0]

    @property
    def read_by(self) -> str:
        """How qairt_build was read: QNN's API, or the byte-scan fallback (docs/host-qnn.md)."""
        return self.known_read_by if self.known_build is not None else read_qairt_build(self.htp_lib)[1]

    @property
    def qairt_version(self) -> str:
        """"2.49.40" of "v2.49.40.260810104044"."""
        return qairt_version_of(self.qairt_build)

    @property
    def system_lib(self) -> Path:
        return self.lib_dir / "libQnnSystem.so"

    @property
    def htp_lib(self) -> Path:
        return self.lib_dir / "libQnnHtp.so"

    def child_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """A copy of `base` with QNN_SDK_ROOT and LD_LIBRARY_PATH (lib_dir, which holds the libc++
        the libraries need, first) for a child process; `base` and os.environ are left alone."""
        env = dict(base)
        env["QNN_SDK_ROOT"] = str(self.sdk_root)
        mine = str(self.lib_dir)
        rest = [p for p in (base.get("LD_LIBRARY_PATH") or "").split(os.pathsep) if p and p != mine]
        env["LD_LIBRARY_PATH"] = os.pathsep.join([mine, *rest])
        return env


def qairt_version_of(build: str) -> str:
    """"v2.49.40.260810104044" or "2.49.40.260810104044" -> "2.49.40"; other text is returned as is."""
    m = _BUILD_RE.search(build.encode())
    return ".".join(m.group(i).decode() for i in (1, 2, 3)) if m else build


def find_host_qnn(qnn_sdk: Path | str | None = None, environ: Mapping[str, str] | None = None,
                  *, cache_dir: Path | None = None) -> HostQnn:
    """The host's QAIRT libraries (module doc); their version (`qairt_build`) is read from
    libQnnHtp.so when first asked for. QnnUnavailable says what was looked at and how to fix it."""
    env = os.environ if environ is None else environ
    if qnn_sdk:
        root = Path(qnn_sdk).expanduser()
        return _from_sdk(root, "--qnn-sdk", f"--qnn-sdk {root}")
    if env.get("QNN_SDK_ROOT"):
        root = Path(env["QNN_SDK_ROOT"]).expanduser()
        return _from_sdk(root, "$QNN_SDK_ROOT", f"QNN_SDK_ROOT={root} (unset it to use the {WHEEL_DIST} wheel)")
    spec = importlib.util.find_spec(WHEEL_MODULE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise QnnUnavailable("no host QNN libraries: --qnn-sdk not given, QNN_SDK_ROOT not set, and the "
                             f"{WHEEL_DIST} wheel is not installed for {sys.executable}; {INSTALL_HINT}")
    pkg = Path(locations[0])
    dist_version = _wheel_version(pkg)
    root = _wheel_layout(pkg, dist_version, cache_dir or user_cache_dir())
    return _described(root, f"{WHEEL_DIST} {dist_version} wheel")


def auto_host_qnn(qnn_sdk: Path | str | None = None,
                  environ: Mapping[str, str] | None = None) -> tuple[HostQnn | None, str]:
    """The host's QAIRT libraries for reading context binaries on the side (compiled IO,
    provisioning's target guard): (host, "") when found, (None, why not) when $HARNESS_HOST_QNN is
    off or nothing is found. A --qnn-sdk without x86 libraries (a device-only SDK) falls through
    to $QNN_SDK_ROOT and the wheel."""
    env = os.environ if environ is None else environ
    if env.get(HOST_QNN_SWITCH, "").strip().lower() in _OFF:
        return None, f"{HOST_QNN_SWITCH}={env[HOST_QNN_SWITCH]}: the host's QAIRT libraries are not used"
    tried: list[str] = []
    if qnn_sdk:
        if not Path(qnn_sdk).expanduser().is_dir():  # a typo is an error, never the wheel in its place
            return None, f"--qnn-sdk {qnn_sdk}: not a folder; pass the QNN SDK's root (the folder holding lib/)"
        try:
            return find_host_qnn(qnn_sdk, env), ""
        except QnnUnavailable as exc:
            tried.append(str(exc))
    try:
        found = find_host_qnn(None, env)
    except QnnUnavailable as exc:
        tried.append(str(exc))
        return None, "; ".join(tried)
    if tried:  # a device-only --qnn-sdk: another library reads the binaries, and says so
        found = replace(found, source=f"{found.source} (--qnn-sdk {qnn_sdk} has no x86 libraries: {tried[0]})")
    return found, ""


def _wheel_version(pkg: Path) -> str:
    """The installed wheel's version, from its <name>-<version>.dist-info folder beside the
    package: importlib.metadata costs ~10 ms of imports (an email parser) per `harness push`,
    the folder name says the same; importlib.metadata only where no such folder is found."""
    dist = WHEEL_DIST.replace("-", "_")
    # A name filter over one listing, not pathlib's glob: site-packages holds hundreds of names,
    # and glob's per-name Path work was ~2 ms of every unchanged re-provision.
    try:
        names = os.listdir(pkg.parent)
    except OSError:
        names = []
    found = sorted(n[len(dist) + 1:-len(".dist-info")] for n in names
                   if n.startswith(f"{dist}-") and n.endswith(".dist-info"))
    if len(found) == 1:
        return found[0]
    import importlib.metadata

    try:
        return importlib.metadata.version(WHEEL_DIST)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _missing(lib_dir: Path) -> list[str]:
    return [n for n in REQUIRED_LIBS if not (lib_dir / n).is_file()]


def _from_sdk(root: Path, source: str, named: str) -> HostQnn:
    lib_dir = root / LIB_SUBDIR
    missing = _missing(lib_dir)
    if missing:
        raise QnnUnavailable(f"{named}: {lib_dir} has no {', '.join(missing)}; point it at a folder whose "
                             f"{LIB_SUBDIR}/ holds the x86 QAIRT libraries, or {INSTALL_HINT}")
    return _described(root, source)


def _described(root: Path, source: str) -> HostQnn:
    return HostQnn(root / LIB_SUBDIR, root, None, source)  # the build is read when first asked for


def _wheel_layout(pkg: Path, dist_version: str, cache: Path) -> Path:
    """<cache>/qnn-sdk/<name>/lib/x86_64-linux-clang/: symlinks to the wheel's onnxruntime_qnn/*.so
    and onnxruntime_qnn.libs/* (the libc++ they link), named per wheel folder and version so two
    environments never share one. Built under a temp name, then renamed into place."""
    libs = pkg.parent / f"{WHEEL_MODULE}.libs"
    sources = sorted(pkg.glob("*.so")) + (sorted(p for p in libs.iterdir() if p.is_file()) if libs.is_dir() else [])
    missing = [n for n in REQUIRED_LIBS if not (pkg / n).is_file()]
    if missing:
        raise QnnUnavailable(f"the {WHEEL_DIST} wheel at {pkg} has no {', '.join(missing)} (a build without the "
                             f"QAIRT libraries?); reinstall it: {INSTALL_HINT}")
    # Each folder resolved once (a resolve per file is an lstat per path component, ~3 ms a
    # push): only a file that is itself a symlink is resolved on its own.
    real_dirs = {d: d.resolve() for d in {p.parent for p in sources}}
    real = [p.resolve() if p.is_symlink() else real_dirs[p.parent] / p.name for p in sources]
    stats = [p.stat() for p in real]
    key = hashlib.sha256("\n".join(f"{p}:{st.st_size}:{st.st_mtime_ns}" for p, st in zip(real, stats)).encode())
    final = cache / "qnn-sdk" / f"{WHEEL_DIST}-{dist_version}-{key.hexdigest()[:12]}"
    if _layout_ok(final, real):
        return final
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / LIB_SUBDIR).mkdir(parents=True)
        for p in real:
            (tmp / LIB_SUBDIR / p.name).symlink_to(p)
        (tmp / "harness-layout.json").write_text(json.dumps({"from": str(pkg), "files": [str(p) for p in real]}))
    except OSError as exc:  # a read-only or full home: the layout has nowhere to go
        shutil.rmtree(tmp, ignore_errors=True)
        raise QnnUnavailable(f"could not lay out the {WHEEL_DIST} libraries under {cache} ({exc.strerror or exc}); "
                             "set HARNESS_CACHE_DIR to a writable folder") from None
    try:
        tmp.rename(final)
    except OSError:  # a folder is there: another process's complete copy, or a broken one
        if _layout_ok(final, real):
            shutil.rmtree(tmp, ignore_errors=True)
            return final
        shutil.rmtree(final, ignore_errors=True)
        try:
            tmp.rename(final)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise QnnUnavailable(f"could not lay out the {WHEEL_DIST} libraries in {final} ({exc.strerror}); "
                                 "remove that folder and run again") from None
    return final


def _layout_ok(root: Path, real: list[Path]) -> bool:
    # readlink, not resolve: the layout's links hold the real paths themselves (one syscall each).
    lib_dir = root / LIB_SUBDIR
    try:
        return all(os.readlink(lib_dir / p.name) == str(p) for p in real)
    except OSError:  # absent, or not a link
        return False


def read_qairt_build(htp_lib: Path) -> tuple[str, str]:
    """(build id, how it was read) of libQnnHtp.so; cached per (path, size, mtime)."""
    st = htp_lib.stat()
    return _read_cached(str(htp_lib.resolve()), st.st_size, st.st_mtime_ns)


_BUILD_MEMO = "qnn-build-ids.json"  # in user_cache_dir(): {"path|size|mtime_ns": [build, read_by]}


@functools.lru_cache(maxsize=8)
def _read_cached(path: str, size: int, mtime_ns: int) -> tuple[str, str]:
    # The API read costs a child process (~0.6 s: libQnnHtp.so's banner on stdout and its load
    # time), paid by every `harness push` of a QNN export before the first byte (issue 28's CLI
    # row); the answer only changes with the file, so it is kept on disk per (path, size, mtime).
    key = f"{path}|{size}|{mtime_ns}"
    memo_path = user_cache_dir() / _BUILD_MEMO
    memo = _read_memo(memo_path)
    if key in memo:
        return memo[key]
    found = _read_in_child(path)
    if found[1] == "QnnInterface backendGetBuildId":  # a scan fallback is not remembered: retried next run
        memo[key] = found
        try:
            memo_path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(memo_path, json.dumps({k: list(v) for k, v in memo.items()}, indent=1))
        except (OSError, HarnessError):
            pass  # a read-only cache costs the next run the child again, nothing else
    return found


def _read_memo(path: Path) -> dict[str, tuple[str, str]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {str(k): (str(v[0]), str(v[1])) for k, v in raw.items()
            if isinstance(v, list) and len(v) == 2 and _BUILD_RE.fullmatch(str(v[0]).encode())}


def _read_in_child(path: str) -> tuple[str, str]:
    import subprocess  # only here: most runs find the build id in the memo

    env = dict(os.environ)
    env["PYTHONPATH"] = child_pythonpath(env.get("PYTHONPATH"))
    try:
        proc = subprocess.run([sys.executable, "-m", "harness.qnn.buildid", path], capture_output=True,
                              text=True, timeout=_READ_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        proc = None
    found = _build_line(proc.stdout) if proc is not None and proc.returncode == 0 else None
    if found is not None:
        return found, "QnnInterface backendGetBuildId"
    why = ("timed out" if proc is None else
           (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1])
    return _scan_build(Path(path), why)


def _build_line(stdout: str) -> str | None:
    """The child's JSON line; QNN's libraries print lines of their own after it (libnative's
    "# LIBNATIVE: No alternate configuration ..." in a bare environment, `env -i`)."""
    for line in reversed(stdout.splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and isinstance(found.get("build_id"), str):
            return str(found["build_id"])
    return None


def scan_qairt_build(lib: Path) -> str | None:
    """The QAIRT build string a QNN library embeds ("v2.49.40.260810104044", the text
    backendGetBuildId returns), read from its bytes: for libraries this host cannot load (a
    device's aarch64 libQnnHtp.so) or as the fallback below. None unless exactly one is found."""
    found: set[bytes] = set()
    try:
        with lib.open("rb") as fh:
            tail = b""
            while chunk := fh.read(1 << 22):
                found.update(m.group(0) for m in _BUILD_RE.finditer(tail + chunk))
                tail = chunk[-32:]
    except OSError:
        return None
    return "v" + found.pop().decode().lstrip("v") if len(found) == 1 else None


def qairt_tuple(build: str) -> tuple[int, int, int] | None:
    """(2, 49, 40) of "v2.49.40.260810104044" or "2.49.40"; None for other text."""
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", build)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _scan_build(lib: Path, why: str) -> tuple[str, str]:
    """The fallback when the library cannot be loaded here (docs/host-qnn.md)."""
    build = scan_qairt_build(lib)
    if build is None:
        raise QnnUnavailable(f"{lib}: cannot read its QAIRT version (not loadable: {why}; no single build "
                             f"string in the file); {INSTALL_HINT}")
    return build, f"byte scan of the library ({why})"


# ExecuTorch version -> (QAIRT major.minor that works, exact QAIRT versions measured failing).
# Evidence: docs/host-qnn.md#pairing (ExecuTorch 1.5.1 is built against QNN 2.37 headers).
_PAIRING: dict[str, tuple[str, frozenset[str]]] = {
    "1.5.1": ("2.49", frozenset({"2.48.40", "2.50.40", "2.51.0"})),
}


def _installed_executorch() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("executorch")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_executorch_pairing(host: HostQnn, executorch_version: str | None = None) -> None:
    """Refuse (QnnAbiMismatch) a measured-failing ExecuTorch/QAIRT pair before anything runs;
    warn (QnnPairingUnverified) on a pair nobody measured. No ExecuTorch installed: nothing to check."""
    et = executorch_version or _installed_executorch()
    if et is None:
        return
    et_base = et.split("+", 1)[0]
    qairt = host.qairt_version
    known = _PAIRING.get(et_base)
    if known is None:
        warnings.warn(QnnPairingUnverified(f"ExecuTorch {et} with QAIRT {qairt} ({host.source}) was never measured "
                                           "here; it may fail at device creation (docs/host-qnn.md#pairing)"),
                      stacklevel=2)
        return
    works, fails = known
    if qairt in fails:
        raise QnnAbiMismatch(
            f"ExecuTorch {et} cannot drive QAIRT {qairt} ({host.source}, {host.lib_dir}): every lowering and run "
            "stops at device creation ('unknown custom config socModel 0', error 14001; the device config "
            f"layout differs). Use QAIRT {works}.x: pip install 'onnxruntime-qnn==2.5.0' (QAIRT 2.49.40), "
            "or --qnn-sdk / QNN_SDK_ROOT naming a 2.49 SDK")
    if not qairt.startswith(works + "."):
        warnings.warn(QnnPairingUnverified(f"ExecuTorch {et} is measured with QAIRT {works}.x; QAIRT {qairt} "
                                           f"({host.source}) was never tried (docs/host-qnn.md#pairing)"), stacklevel=2)
