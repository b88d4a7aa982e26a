"""What a virtual runtime program sees of the device it runs on: SoC/arch, where the dynamic
linker and FastRPC would find the QNN libraries, and where MNN_PRINT output goes.

Runs inside the device sandbox (virtual_lab.device) and on the host (LocalTransport tests).
Inside the sandbox the device's properties are /system/etc/vlab/build.prop; on the host the
`VLAB_SOC_MODEL` / `VLAB_HTP_ARCH` environment variables stand in for them.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

BUILD_PROP = "/system/etc/vlab/build.prop"
LOGCAT_FILE = "/data/misc/logcat.log"  # virtual_lab.device.layout.LOGCAT_DEVICE_PATH
# Where bionic's linker looks after LD_LIBRARY_PATH, and FastRPC's default Skel folders.
DEFAULT_LIB_DIRS = ("/vendor/lib64", "/system/lib64")
DEFAULT_ADSP_DIRS = ("/vendor/lib/rfsa/adsp", "/vendor/dsp", "/system/lib/rfsa/adsp", "/dsp")
LIB_MAGIC = "VLAB-QNN-LIB"


def read_props(path: str = BUILD_PROP) -> dict[str, str]:
    props: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                key, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    props[key] = value
    except OSError:
        pass
    return props


@dataclass(frozen=True)
class DeviceFacts:
    soc_model: str
    soc_id: int | None
    htp_arch: str  # "v79"; "" when unknown
    logcat_only: bool  # device forces MNN_PRINT to logcat (prop vlab.mnn_use_logcat=1)


def device_facts(env: Mapping[str, str] | None = None) -> DeviceFacts:
    env = os.environ if env is None else env
    props = read_props()
    model = env.get("VLAB_SOC_MODEL") or props.get("ro.soc.model", "")
    arch = env.get("VLAB_HTP_ARCH") or ""
    soc_id = None
    try:  # the harness's SoC table, when the sandbox can see it
        from harness import soc as soc_table

        info = soc_table.lookup(model) if model else None
        if info is not None:
            soc_id, arch = info.soc_id, arch or info.htp_arch
    except ImportError:
        pass
    arch = arch or props.get("ro.vlab.htp_arch", "")
    logcat_only = (env.get("VLAB_MNN_USE_LOGCAT") or props.get("vlab.mnn_use_logcat", "0")) in ("1", "true")
    return DeviceFacts(model, soc_id, arch, logcat_only)


# ---- library lookup -------------------------------------------------------------------------
def _dirs(value: str, sep: str, cwd: str) -> list[str]:
    out = []
    for part in value.split(sep):
        part = part.strip().strip('"')
        if part:
            out.append(part if os.path.isabs(part) else os.path.normpath(os.path.join(cwd, part)))
    return out


def lib_search_dirs(env: Mapping[str, str], extra: tuple[str, ...] = ()) -> list[str]:
    """dlopen order: LD_LIBRARY_PATH (':'-separated), then the binary's rpath, then system."""
    return _dirs(env.get("LD_LIBRARY_PATH", ""), ":", os.getcwd()) + list(extra) + list(DEFAULT_LIB_DIRS)


def adsp_search_dirs(env: Mapping[str, str], extra: tuple[str, ...] = ()) -> list[str]:
    """FastRPC reads ADSP_LIBRARY_PATH split on ';' only (a ':' list is one bad folder)."""
    return _dirs(env.get("ADSP_LIBRARY_PATH", ""), ";", os.getcwd()) + list(extra) + list(DEFAULT_ADSP_DIRS)


def find_lib(name: str, dirs: list[str]) -> str | None:
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    return None


def lib_arch(path: str) -> str | None:
    """The arch a virtual QNN library declares in its header (`arch=v79`), or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(200).decode("ascii", "replace")
    except OSError:
        return None
    if not head.startswith(LIB_MAGIC):
        return None
    for tok in head.split():
        if tok.startswith("arch="):
            return tok[5:]
    return None


def missing_qnn_libs(arch: str, env: Mapping[str, str], *, with_system: bool = True,
                     rpath: tuple[str, ...] = ()) -> str | None:
    """None when the QNN HTP libraries for `arch` are reachable, else the dlerror-style reason."""
    n = arch.lstrip("v")
    ld = lib_search_dirs(env, rpath)
    wanted = ["libQnnHtp.so"] + (["libQnnSystem.so"] if with_system else []) + [f"libQnnHtpV{n}Stub.so"]
    for name in wanted:
        path = find_lib(name, ld)
        if path is None:
            return f'dlopen failed: library "{name}" not found'
        declared = lib_arch(path)
        if declared not in (None, "any", arch):
            return f'dlopen failed: "{path}" is for HTP {declared}, this device is {arch}'
    skel = f"libQnnHtpV{n}Skel.so"
    path = find_lib(skel, adsp_search_dirs(env, rpath))
    if path is None:
        return (f'dlopen failed: library "{skel}" not found in ADSP_LIBRARY_PATH '
                f'({env.get("ADSP_LIBRARY_PATH", "") or "unset"})')
    declared = lib_arch(path)
    if declared not in (None, arch):
        return f'dlopen failed: "{path}" is for HTP {declared}, this device is {arch}'
    return None


# ---- output ------------------------------------------------------------------------------
class Output:
    """stdout/stderr of the program; MNN_PRINT/MNN_ERROR go to logcat when `logcat` is set
    (an Android build with MNN_USE_LOGCAT), tag MNNJNI, one log entry per line."""

    def __init__(self, logcat: bool, tag: str = "MNNJNI"):
        self.logcat = logcat
        self.tag = tag
        self.log_path = os.environ.get("VLAB_LOGCAT_FILE", LOGCAT_FILE)

    def cout(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def cerr(self, text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()

    def mnn(self, text: str, level: str = "I") -> None:
        if not self.logcat:
            self.cout(text)
            return
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        stamp = f"{time.time():.3f}"
        try:
            with open(self.log_path, "a", encoding="utf-8") as fh:
                for line in lines:
                    fh.write(f"{stamp} {os.getpid()} {self.tag} {level} {line}\n")
        except OSError:
            pass  # like __android_log_print: logging never fails the program

    def mnn_print(self, text: str) -> None:
        self.mnn(text, "I")

    def mnn_error(self, text: str) -> None:
        self.mnn(text, "E")


# ---- dying like a native program ------------------------------------------------------------
def die(kind: str) -> None:
    """crash: SIGSEGV, abort: SIGABRT, hang: sleep until killed."""
    sys.stdout.flush()
    sys.stderr.flush()
    if kind == "hang":
        while True:
            time.sleep(3600)
    sig = signal.SIGSEGV if kind == "crash" else signal.SIGABRT
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    time.sleep(5)  # the signal is delivered before this returns
    os._exit(128 + sig)


def read_first_prompt(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                line = line.rstrip("\n").rstrip("\r")
                if line and not line.startswith("#"):
                    return line
    except OSError:
        pass
    return ""


def c_div(a: float, b: float) -> float:
    """C float division: x/0 is +-inf and 0/0 is nan instead of an exception."""
    if b == 0:
        if a == 0 or a != a:
            return float("nan")
        return float("inf") if a > 0 else float("-inf")
    return a / b


def c_fmt(value: float, digits: int) -> str:
    """printf("%.Nf"): bionic prints nan/inf (glibc would print -nan for 0/0)."""
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}f}"


def lib_header(name: str, arch: str | None, sdk: str) -> bytes:
    return f"{LIB_MAGIC} name={name} arch={arch or 'any'} sdk={sdk}\n".encode()


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]
