"""One emulated Android device: sandbox tree, properties, shell, disk, counters, adbd.

Layout of a device root folder (host side)::

    ROOT/data/local/tmp  ROOT/data/misc      -> /data      (read-write)
    ROOT/vendor/lib64    ROOT/vendor/lib/rfsa/adsp -> /vendor (read-only)
    ROOT/system/bin      Android's userland (virtual_lab.userland: sh is mksh, toybox's Android
                         applets, awk) and the helpers getprop, dumpsys, df, logcat, vlabstat
                                             -> /system (read-only)
    ROOT/sdcard                              -> /sdcard    (read-write)
    ROOT/state           (outside the sandbox, written by the device process only)
                                             -> /system/etc/vlab (read-only inside)

`ROOT/state` holds `build.prop` (getprop), `battery.prop` (dumpsys battery), `disk.prop`
(virtual capacity for df), `device.json` (the spec, e.g. htp_arch for the virtual runtime),
`counters.json` (the device's own counters, also printed by `vlabstat` in the device
shell) and `faults.json` (the fault control file, see `virtual_lab.faults`).

Logcat: the virtual runtime appends lines `<epoch> <pid> <tag> <level> <message>` (level one
of V D I W E F) to `/data/misc/logcat.log`; the `logcat` helper reads it (`-d`, `-c`,
`-s TAG`, `TAG:LEVEL` filters, `-v brief|threadtime|time`, `-t N`).

Shell commands run as `/system/bin/sh -c CMD` (mksh) under bubblewrap as the shell user (uid
2000, in a user namespace), PATH /system/bin:/system/xbin:/vendor/bin only, with those folders
bound at their Android paths, all capabilities dropped, and the host pid namespace shared (so
`$!` and a later `kill PID` work). Host /usr, /lib* and /etc stay mounted read-only only so
that the dynamic loader, libc and the Python interpreter (the virtual runtimes, a real glibc
llm_demo) are reachable by absolute path; no host folder is on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Mapping, Sequence

from virtual_lab.adbd.server import AdbdServer
from virtual_lab.faults import FaultControlFile, FaultPlan, FaultSettings, Throttle
from virtual_lab.userland import find_userland

GiB = 1024**3
LOGCAT_DEVICE_PATH = "/data/misc/logcat.log"
COUNTERS_DEVICE_PATH = "/system/etc/vlab/counters.json"
STATE_DEVICE_DIR = "/system/etc/vlab"
SHELL_PATH = "/system/bin:/system/xbin:/vendor/bin"  # as Android's adbd sets it: no host /bin
SHELL_UID = 2000  # AID_SHELL: adbd runs commands as the shell user, not root


class DeviceError(ValueError):
    """Bad device spec or a device path outside the sandbox (message names what to fix)."""


@dataclass(frozen=True)
class VirtualDeviceSpec:
    """What the device says about itself (CNXN banner, getprop, dumpsys)."""

    name: str
    product: str = "sun"            # ro.product.name
    model: str = "CPH2653"          # ro.product.model (OnePlus 13)
    device: str = "OP5D0DL1"        # ro.product.device
    manufacturer: str = "OnePlus"
    soc_model: str = "SM8750"
    soc_manufacturer: str = "QTI"
    board_platform: str = "sun"
    sdk: int = 35
    release: str = "15"
    htp_arch: str = "v79"
    serialno: str = ""              # ro.serialno; defaults to a name-derived value
    disk_capacity_bytes: int = 64 * GiB
    battery_level: int = 85
    battery_temperature_decic: int = 312  # tenths of a degree C, as dumpsys prints it
    props: Mapping[str, str] = field(default_factory=dict)  # extra props, override the above

    def __post_init__(self) -> None:
        where = f"virtual device {self.name!r}"
        if not self.name or not isinstance(self.name, str):
            raise DeviceError("virtual device spec: `name` must be a non-empty string")
        for key in ("product", "model", "device"):
            value = getattr(self, key)
            if not value or any(c in value for c in ";:\n\0"):
                raise DeviceError(f"{where}: `{key}` must be non-empty without ';', ':' or newlines, got {value!r}")
        if not isinstance(self.disk_capacity_bytes, int) or self.disk_capacity_bytes <= 0:
            raise DeviceError(f"{where}: `disk_capacity_bytes` must be a positive integer")
        if not 0 <= int(self.battery_level) <= 100:
            raise DeviceError(f"{where}: `battery_level` must be 0..100, got {self.battery_level!r}")
        if not (self.htp_arch.startswith("v") and self.htp_arch[1:].isdigit()):
            raise DeviceError(f"{where}: `htp_arch` must look like 'v79', got {self.htp_arch!r}")
        for k, v in dict(self.props).items():
            if not isinstance(k, str) or not k or any(c in k for c in "=\n ") or "\n" in str(v):
                raise DeviceError(f"{where}: property {k!r} must be a name without '=', spaces or newlines")

    @classmethod
    def from_dict(cls, data: Mapping[str, object], source: str = "virtual device spec") -> "VirtualDeviceSpec":
        if not isinstance(data, Mapping):
            raise DeviceError(f"{source}: expected a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DeviceError(f"{source}: unknown key(s) {unknown}; known: {sorted(known)}")
        try:
            return cls(**data)  # type: ignore[arg-type]
        except TypeError as exc:
            raise DeviceError(f"{source}: {exc}") from None

    def all_props(self) -> dict[str, str]:
        props = {
            "ro.product.name": self.product,
            "ro.product.model": self.model,
            "ro.product.device": self.device,
            "ro.product.manufacturer": self.manufacturer,
            "ro.product.brand": self.manufacturer,
            "ro.product.cpu.abi": "arm64-v8a",
            "ro.soc.model": self.soc_model,
            "ro.soc.manufacturer": self.soc_manufacturer,
            "ro.board.platform": self.board_platform,
            "ro.hardware": "qcom",
            "ro.build.version.sdk": str(self.sdk),
            "ro.build.version.release": self.release,
            "ro.serialno": self.serialno or f"vlab-{self.name}",
            "ro.vlab.htp_arch": self.htp_arch,
            "sys.boot_completed": "1",
        }
        props.update({str(k): str(v) for k, v in dict(self.props).items()})
        return props

    def banner(self, features: Sequence[str]) -> str:
        return (f"device::ro.product.name={self.product};ro.product.model={self.model};"
                f"ro.product.device={self.device};features={','.join(features)}")


@dataclass(frozen=True)
class _Mount:
    device: str   # Android path
    sub: str      # folder under the device root
    writable: bool


# Longest device prefix first: /system/etc/vlab sits inside /system.
MOUNTS: tuple[_Mount, ...] = (
    _Mount("/system/etc/vlab", "state", False),
    _Mount("/data", "data", True),
    _Mount("/vendor", "vendor", False),
    _Mount("/system", "system", False),
    _Mount("/sdcard", "sdcard", True),
)

_TREE = ("data/local/tmp", "data/misc", "vendor/lib64", "vendor/lib/rfsa/adsp", "vendor/bin",
         "vendor/etc", "system/bin", "system/xbin", "system/lib64", "system/etc/vlab", "sdcard/Download", "state")


@dataclass(frozen=True)
class Resolved:
    """A device path after symlinks were followed inside the sandbox."""

    device: str
    host: Path | None      # None: nothing of the sandbox is there
    writable: bool
    is_root: bool = False  # "/" (a virtual directory listing the mounts)


class Sandbox:
    """The device's Android tree on the host, and how to run a shell inside it."""

    def __init__(self, root: Path, extra_ro_binds: Sequence[Path] = ()) -> None:
        self.root = Path(root).resolve()
        self.state_dir = self.root / "state"
        self.extra_ro_binds = tuple(Path(p) for p in extra_ro_binds)

    # ---- tree ---------------------------------------------------------------------------
    def create(self) -> None:
        for sub in _TREE:
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "data/local/tmp").chmod(0o771)
        lib = self.root / "vendor/lib64/libcdsprpc.so"
        if not lib.exists():  # a real device has the FastRPC client library here
            lib.write_bytes(b"\x7fELF placeholder: virtual lab libcdsprpc.so\n")
        helpers = _helpers()
        find_userland().populate(self.root / "system/bin", keep=frozenset(helpers))
        for name, text in helpers.items():
            path = self.root / "system/bin" / name
            if path.is_symlink():
                path.unlink()
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
            path.chmod(0o755)
        # bionic knows the shell user by itself; glibc programs (toybox id, ls -l) read these.
        for name, text in (("passwd", _PASSWD), ("group", _GROUP)):
            path = self.root / "system/etc" / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)

    def host_path(self, device_path: str) -> Path:
        """Host path of a device path (lexically; symlinks are not followed)."""
        if not device_path.startswith("/"):
            raise DeviceError(f"device path {device_path!r} must be absolute")
        norm = os.path.normpath(device_path)
        host = self._map(norm)
        if host is None:
            raise DeviceError(f"device path {device_path!r} is outside the sandbox "
                              f"(mounts: {', '.join(m.device for m in MOUNTS)})")
        return host

    def _mount_of(self, device_path: str) -> _Mount | None:
        for m in MOUNTS:
            if device_path == m.device or device_path.startswith(m.device + "/"):
                return m
        return None

    def _map(self, device_path: str) -> Path | None:
        m = self._mount_of(device_path)
        if m is None:
            return None
        rest = device_path[len(m.device):].lstrip("/")
        return self.root / m.sub / rest if rest else self.root / m.sub

    def resolve(self, path: str, follow_last: bool = True) -> Resolved:
        """Follow symlinks as the device would see them, never leaving the sandbox view.

        A link to /etc/passwd resolves to the device path /etc/passwd, which maps to nothing
        (host /etc is not part of the sandbox for file transfers).
        """
        todo = [c for c in path.split("/") if c][::-1]
        out: list[str] = []
        hops = 0
        while todo:
            comp = todo.pop()
            if comp == ".":
                continue
            if comp == "..":
                if out:
                    out.pop()
                continue
            out.append(comp)
            if not todo and not follow_last:
                break
            host = self._map("/" + "/".join(out))
            if host is None:
                continue
            try:
                st = os.lstat(host)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > 40:  # ELOOP, as the kernel would say
                    return Resolved("/" + "/".join(out), None, False)
                target = os.readlink(host)
                out.pop()
                if target.startswith("/"):
                    out = []
                todo.extend([c for c in target.split("/") if c][::-1])
        device = "/" + "/".join(out)
        if device == "/":
            return Resolved("/", None, False, is_root=True)
        m = self._mount_of(device)
        return Resolved(device, self._map(device), bool(m and m.writable))

    @staticmethod
    def root_entries() -> list[str]:
        return sorted({m.device.split("/")[1] for m in MOUNTS})

    # ---- shell --------------------------------------------------------------------------
    def bwrap_argv(self, command: str) -> list[str]:
        argv = ["bwrap", "--unshare-user", "--uid", str(SHELL_UID), "--gid", str(SHELL_UID),
                "--cap-drop", "ALL", "--unshare-uts", "--hostname", "localhost", "--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                argv += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                argv += ["--ro-bind", top, top]
        argv += ["--ro-bind", "/etc", "/etc", "--ro-bind", str(self.root / "system/etc/passwd"), "/etc/passwd",
                 "--ro-bind", str(self.root / "system/etc/group"), "/etc/group",
                 "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        # After the /tmp tmpfs: a checkout or interpreter under /tmp must stay visible.
        for extra in self._python_dirs() + [str(p.resolve()) for p in self.extra_ro_binds]:
            argv += ["--ro-bind", extra, extra]
        for m in sorted(MOUNTS, key=lambda m: len(m.device)):  # parents before nested mounts
            argv += ["--bind" if m.writable else "--ro-bind", str(self.root / m.sub), m.device]
        argv += ["--chdir", "/", "--clearenv"]
        env = {"PATH": SHELL_PATH, "HOME": "/", "TMPDIR": "/data/local/tmp", "ANDROID_DATA": "/data",
               "ANDROID_ROOT": "/system", "EXTERNAL_STORAGE": "/sdcard", "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "HOSTNAME": "localhost"}
        for k, v in env.items():
            argv += ["--setenv", k, v]
        return argv + ["/system/bin/sh", "-c", command]

    @staticmethod
    def _python_dirs() -> list[str]:
        # The virtual runtime's scripts run with #!sys.executable: make that interpreter and
        # its libraries visible (read-only). Folders under /usr are bound already.
        dirs: list[str] = []
        candidates = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
        try:
            import site
            candidates += site.getsitepackages()
        except AttributeError:
            pass
        for d in candidates:
            d = os.path.realpath(d)
            if not os.path.isdir(d) or d == "/usr" or d.startswith("/usr/") or d in ("/", "/etc"):
                continue
            if any(d == k or d.startswith(k + "/") for k in dirs):
                continue
            dirs = [k for k in dirs if not k.startswith(d + "/")] + [d]
        return dirs

    def popen(self, command: str, *, merge_stderr: bool) -> subprocess.Popen:
        # A new session: the whole command (and what it spawns without setsid) shares one
        # process group that can be hung up when the client goes away.
        return subprocess.Popen(
            self.bwrap_argv(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            cwd=str(self.root), start_new_session=True, bufsize=0)

    def run(self, command: str, timeout: float | None = 60, input: bytes | None = None) -> subprocess.CompletedProcess:
        """Run a shell command in the sandbox directly (no adb): for setup and tests."""
        proc = self.popen(command, merge_stderr=False)
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise
        return subprocess.CompletedProcess(proc.args, exit_code(proc.returncode), out, err)


def exit_code(returncode: int) -> int:
    """Popen's -N (killed by signal N) as a shell reports it: 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class DiskModel:
    """The virtual /data partition: capacity from the spec, used = bytes under data/ and sdcard/.

    `set_free_bytes(n)` (a fault) caps what fits from then on: free = n - growth since.
    """

    CACHE_S = 1.0

    def __init__(self, sandbox: Sandbox, capacity: int) -> None:
        self.sandbox = sandbox
        self.capacity = capacity
        self._lock = threading.Lock()
        self._cache: tuple[float, int] | None = None
        self._limit: int | None = None
        self._baseline = 0

    def used_bytes(self, fresh: bool = False) -> int:
        with self._lock:
            if not fresh and self._cache and time.monotonic() - self._cache[0] < self.CACHE_S:
                return self._cache[1]
        used = 0
        for sub in ("data", "sdcard"):
            top = self.sandbox.root / sub
            used += _apparent_size(top)
        with self._lock:
            self._cache = (time.monotonic(), used)
        return used

    def note_written(self, nbytes: int) -> None:
        with self._lock:
            if self._cache:
                self._cache = (self._cache[0], self._cache[1] + nbytes)

    def free_bytes(self) -> int:
        used = self.used_bytes()
        free = self.capacity - used
        with self._lock:
            if self._limit is not None:
                free = min(free, self._limit - max(0, used - self._baseline))
        return max(0, free)

    def set_limit(self, free_bytes: int | None) -> None:
        baseline = self.used_bytes(fresh=True)
        with self._lock:
            self._limit, self._baseline = free_bytes, baseline
        self.write_state()

    def write_state(self) -> None:
        with self._lock:
            limit = "" if self._limit is None else str(self._limit)
            text = f"capacity={self.capacity}\nlimit={limit}\nbaseline={self._baseline}\n"
        _atomic_write(self.sandbox.state_dir / "disk.prop", text)


def _apparent_size(top: Path) -> int:
    """Bytes as `du -sb` counts them (files and directories, hard links once)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(top)]
    try:
        total += os.lstat(top).st_size
    except OSError:
        return 0
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_size
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
    return total


@dataclass
class DeviceCounters:
    """The device's own view of what it served (tests compare the harness against these)."""

    send_bytes: int = 0        # file bytes written by sync SEND
    send_files: int = 0        # SENDs completed with OKAY
    send_failures: int = 0     # SENDs answered FAIL or cut off
    recv_bytes: int = 0        # file bytes sent by sync RECV
    recv_files: int = 0
    connections: int = 0       # transport connections accepted (CNXN answered or refused)
    connections_aborted: int = 0
    service_opens: dict[str, int] = field(default_factory=dict)   # shell, shell_v2, exec, sync, refused
    sync_requests: dict[str, int] = field(default_factory=dict)   # STAT, STA2, LIST, SEND, RECV...
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **deltas: int) -> None:
        with self._lock:
            for key, n in deltas.items():
                setattr(self, key, getattr(self, key) + n)

    def bump(self, table: str, key: str) -> None:
        with self._lock:
            d = getattr(self, table)
            d[key] = d.get(key, 0) + 1

    def snapshot(self) -> dict:
        with self._lock:
            data = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
            data["service_opens"] = dict(self.service_opens)
            data["sync_requests"] = dict(self.sync_requests)
        return data


class VirtualDevice:
    """An emulated Android device reachable as `127.0.0.1:PORT` through `adb connect`."""

    def __init__(self, spec: VirtualDeviceSpec, root: Path, *, host: str = "127.0.0.1", port: int = 0,
                 extra_ro_binds: Sequence[Path] = (), watch_control_file: bool = True) -> None:
        if shutil.which("bwrap") is None:
            raise DeviceError(f"virtual device {spec.name!r}: bubblewrap (`bwrap`) is not on PATH; "
                              "install the Debian `bubblewrap` package")
        self.spec = spec
        self.sandbox = Sandbox(Path(root), extra_ro_binds or _default_ro_binds())
        self.root = self.sandbox.root
        self.host = host
        self._port = port
        self._watch = watch_control_file
        self.faults = FaultPlan()
        self.counters = DeviceCounters()
        self.throttle = Throttle(lambda: self.faults.settings.slow_bytes_per_s)
        self.disk = DiskModel(self.sandbox, spec.disk_capacity_bytes)
        self._server: AdbdServer | None = None
        self._flush_lock = threading.Lock()
        self.sandbox.create()
        self._write_state()
        self.faults.add_listener(self._on_faults)

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> "VirtualDevice":
        if self._server is not None:
            return self
        server = AdbdServer(self, host=self.host, port=self._port)
        server.start()
        self._server = server
        self._port = server.port
        if self._watch:
            self.faults.watch_file(self.control_path)
        return self

    def stop(self) -> None:
        self.faults.stop_watching()
        if self._server is not None:
            self._server.stop()
            self._server = None
        self.flush_counters()

    def restart(self) -> None:
        """Stop and come back on the same port (the adb server then needs a reconnect)."""
        self.stop()
        self.start()

    def __enter__(self) -> "VirtualDevice":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        if not self._port:
            raise DeviceError(f"virtual device {self.spec.name!r} has no port yet: call start() first")
        return self._port

    @property
    def serial(self) -> str:
        """The serial the adb server lists after `adb connect`."""
        return f"{self.host}:{self.port}"

    @property
    def control_path(self) -> Path:
        """JSON fault control file another process may write (`FaultControlFile`)."""
        return self.sandbox.state_dir / "faults.json"

    @property
    def counters_path(self) -> Path:
        """Host path of counters.json (inside the device: /system/etc/vlab/counters.json)."""
        return self.sandbox.state_dir / "counters.json"

    def wait_idle(self, timeout: float = 10) -> bool:
        """Wait until the device finished every service it was serving (clean-up, counters).

        A client can see a failure (e.g. a cut link) before the device has finished reacting
        to it; tests that inspect the sandbox or the counters right after call this first."""
        return self._server.wait_idle(timeout) if self._server is not None else True

    # ---- used by the adbd server (virtual_lab.adbd.contract.AdbdDevice) -----------------
    @property
    def name(self) -> str:
        return self.spec.name

    def banner(self, features: Sequence[str]) -> str:
        return self.spec.banner(features)

    def counters_snapshot(self) -> dict:
        data = self.counters.snapshot()
        data["faults"] = asdict(self.faults.counters)
        data["throttle"] = self.throttle.snapshot()
        return data

    def flush_counters(self) -> None:
        with self._flush_lock:
            _atomic_write(self.counters_path, json.dumps(self.counters_snapshot(), indent=1, sort_keys=True))

    # ---- conveniences for tests and the virtual runtime ---------------------------------
    def host_path(self, device_path: str) -> Path:
        return self.sandbox.host_path(device_path)

    def shell(self, command: str, timeout: float | None = 60) -> subprocess.CompletedProcess:
        """Run `sh -c command` in the sandbox without adb (stdout/stderr bytes, returncode)."""
        return self.sandbox.run(command, timeout=timeout)

    def set_battery(self, level: int | None = None, temperature_decic: int | None = None) -> None:
        cur = self._battery
        self._battery = (cur[0] if level is None else int(level),
                         cur[1] if temperature_decic is None else int(temperature_decic))
        self._write_battery()

    def log(self, tag: str, message: str, level: str = "I", pid: int = 0) -> None:
        """Append one line to the device's logcat buffer (as the virtual runtime does)."""
        if level not in "VDIWEF" or len(level) != 1:
            raise DeviceError(f"logcat level must be one of V D I W E F, got {level!r}")
        line = f"{time.time():.3f} {int(pid)} {tag.replace(' ', '_')} {level} {message}\n"
        with open(self.host_path(LOGCAT_DEVICE_PATH), "a", encoding="utf-8") as fh:
            fh.write(line)

    # ---- internals ----------------------------------------------------------------------
    def _write_state(self) -> None:
        state = self.sandbox.state_dir
        props = "".join(f"{k}={v}\n" for k, v in sorted(self.spec.all_props().items()))
        _atomic_write(state / "build.prop", props)
        spec = asdict(self.spec)
        spec["props"] = dict(self.spec.props)
        _atomic_write(state / "device.json", json.dumps(spec, indent=1, sort_keys=True))
        self._battery = (self.spec.battery_level, self.spec.battery_temperature_decic)
        self._write_battery()
        self.disk.write_state()
        if self.control_path.exists():  # a fresh device starts without faults
            FaultControlFile(self.control_path).write(FaultSettings())
        self.flush_counters()

    def _write_battery(self) -> None:
        level, temp = self._battery
        _atomic_write(self.sandbox.state_dir / "battery.prop", f"level={level}\ntemperature={temp}\n")

    def _on_faults(self, old: FaultSettings, new: FaultSettings) -> None:
        if new.free_bytes != old.free_bytes:
            self.disk.set_limit(new.free_bytes)
        if new.offline_until != old.offline_until and self.faults.is_offline() and self._server:
            self._server.abort_connections()
        if old.unauthorized and not new.unauthorized and self._server:
            self._server.grant_pending_auth()  # the user tapped "Allow"


def _default_ro_binds() -> tuple[Path, ...]:
    # The virtual runtime (virtual_lab/runtime) runs inside the sandbox and imports this package
    # and the harness's reference computations (harness.checks.mrope, via virtual_lab.mrope_sim), read-only.
    here = Path(__file__).resolve().parent
    return (here, here.parent / "harness")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# ---- helper programs in /system/bin ---------------------------------------------------------
def _helpers() -> dict[str, str]:
    py = os.path.realpath(sys.executable)
    return {
        "getprop": _GETPROP,
        "dumpsys": _DUMPSYS,
        "df": _DF,
        "vlabstat": f"#!/system/bin/sh\n# The virtual device's own counters (adbd side).\nexec cat {COUNTERS_DEVICE_PATH}\n",
        "logcat": f"#!{py} -IS\n" + _LOGCAT,
    }


_PASSWD = "root:x:0:0:root:/:/system/bin/sh\nshell:x:2000:2000:shell:/data/local/tmp:/system/bin/sh\n"
_GROUP = "root:x:0:\nshell:x:2000:\n"

_GETPROP = """#!/system/bin/sh
# getprop [NAME [DEFAULT]]: this virtual device's properties (toybox-like output).
PROPS=/system/etc/vlab/build.prop
if [ $# -eq 0 ]; then
  exec awk '{ i = index($0, "="); if (i > 1) printf "[%s]: [%s]\\n", substr($0, 1, i - 1), substr($0, i + 1) }' "$PROPS"
fi
exec awk -v k="$1" -v d="$2" '
  { i = index($0, "="); if (i > 1 && substr($0, 1, i - 1) == k) { print substr($0, i + 1); found = 1; exit } }
  END { if (!found) print d }' "$PROPS"
"""

_DUMPSYS = """#!/system/bin/sh
# dumpsys battery (level and temperature come from the virtual device's state).
STATE=/system/etc/vlab/battery.prop
case "$1" in
  battery)
    awk -F= '{ v[$1] = $2 } END {
      print "Current Battery Service state:"
      print "  AC powered: false"; print "  USB powered: true"; print "  Wireless powered: false"
      print "  Max charging current: 500000"; print "  Max charging voltage: 5000000"
      print "  status: 2"; print "  health: 2"; print "  present: true"
      print "  level: " v["level"]; print "  scale: 100"; print "  voltage: 4123"
      print "  temperature: " v["temperature"]; print "  technology: Li-ion" }' "$STATE" ;;
  "" | -l)
    echo "Currently running services:"; echo "  battery" ;;
  *)
    echo "Can't find service: $1" ;;
esac
"""

_DF = """#!/system/bin/sh
# df [-k|-h|-P...] [PATH...]: /data and /sdcard report the virtual partition
# (capacity from the device spec, free capped by the disk-full fault); other paths: real df.
human=0
for a in "$@"; do case "$a" in -h) human=1 ;; esac; done
virtual_row() {
  used=$(du -sb /data /sdcard 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
  awk -F= -v used="$used" -v human="$human" '
    { v[$1] = $2 }
    END {
      cap = v["capacity"] + 0; free = cap - used
      if (v["limit"] != "") { grow = used - v["baseline"]; if (grow < 0) grow = 0
                              lim = v["limit"] - grow; if (lim < free) free = lim }
      if (free < 0) free = 0
      u = cap - free; pct = cap > 0 ? int((u * 100 + cap - 1) / cap) : 0
      if (human) printf "%-16s %9s %9s %9s %4d%% %s\\n", "/dev/block/dm-48", h(cap), h(u), h(free), pct, "/data"
      else printf "%-16s %12d %12d %12d %4d%% %s\\n", "/dev/block/dm-48", int(cap / 1024), int(u / 1024), int(free / 1024), pct, "/data"
    }
    function h(x,  s, i) { split("B K M G T", s, " "); i = 1; while (x >= 1024 && i < 5) { x /= 1024; i++ }
                           return sprintf(i == 1 ? "%d%s" : "%.1f%s", x, s[i]) }' /system/etc/vlab/disk.prop
}
if [ "$human" = 1 ]; then hdr="Size"; else hdr="1K-blocks"; fi
printf "%-16s %12s %12s %12s %5s %s\\n" Filesystem "$hdr" Used Available "Use%" "Mounted on"
paths=0
for a in "$@"; do
  case "$a" in
    -*) continue ;;
    /data|/data/*|/sdcard|/sdcard/*) virtual_row ;;
    *) toybox df -k "$a" 2>&1 | tail -n +2 ;;
  esac
  paths=1
done
[ "$paths" = 1 ] || virtual_row
"""

_LOGCAT = '''"""logcat for the virtual device: reads /data/misc/logcat.log.

Lines in the file: <epoch> <pid> <tag> <level> <message>. Supported: -d (dump and exit),
-c (clear), -s (silence all but the given filters), -v brief|threadtime|time, -t N (last N,
implies -d), filterspecs TAG[:LEVEL] and *:LEVEL; -b is accepted and ignored.
"""
import sys, time

LOG = "/data/misc/logcat.log"
LEVELS = "VDIWEFS"


def parse(argv):
    opts = {"dump": False, "clear": False, "fmt": "threadtime", "tail": None, "specs": [], "silent": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-d":
            opts["dump"] = True
        elif a == "-c":
            opts["clear"] = True
        elif a == "-s":
            opts["silent"] = True
        elif a in ("-v", "-b", "-t") or (a[:2] in ("-v", "-b", "-t") and len(a) > 2):
            val = a[2:] if len(a) > 2 else (argv[i + 1] if i + 1 < len(argv) else "")
            i += 0 if len(a) > 2 else 1
            if a.startswith("-v"):
                opts["fmt"] = val
            elif a.startswith("-t"):
                if not val.isdigit():
                    sys.exit(f"logcat: -t wants a line count, got {val!r}")
                opts["tail"], opts["dump"] = int(val), True
        elif a.startswith("-"):
            sys.exit(f"logcat: unsupported option {a} (virtual device logcat)")
        else:
            tag, _, lvl = a.partition(":")
            lvl = (lvl or "V").upper()[:1]
            if lvl not in LEVELS:
                sys.exit(f"logcat: bad level in filterspec {a!r}")
            opts["specs"].append((tag, lvl))
        i += 1
    return opts


def wanted(opts, tag, level):
    default = "S" if opts["silent"] else "V"
    need = None
    for t, lvl in opts["specs"]:
        if t == tag:
            need = lvl
        elif t == "*" and need is None:
            default = lvl
    need = need or default
    return LEVELS.index(level) >= LEVELS.index(need) and need != "S"


def fmt(opts, line):
    parts = line.rstrip("\\n").split(" ", 4)
    if len(parts) < 4:
        return None
    ts, pid, tag, level = parts[:4]
    msg = parts[4] if len(parts) > 4 else ""
    level = level[:1].upper() if level else "I"
    if level not in LEVELS or not wanted(opts, tag, level):
        return None
    try:
        t = float(ts)
    except ValueError:
        return None
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(t)) + ".%03d" % int((t % 1) * 1000)
    if opts["fmt"] == "brief":
        return "%s/%s(%5s): %s" % (level, tag, pid, msg)
    if opts["fmt"] == "time":
        return "%s %s/%s(%5s): %s" % (stamp, level, tag, pid, msg)
    return "%s %5s %5s %s %-8s: %s" % (stamp, pid, pid, level, tag, msg)


def main():
    opts = parse(sys.argv[1:])
    if opts["clear"]:
        open(LOG, "w").close()
        return 0
    try:
        fh = open(LOG, encoding="utf-8", errors="replace")
    except FileNotFoundError:
        fh = None
    out = []
    if fh is not None:
        for line in fh:
            text = fmt(opts, line)
            if text is not None:
                out.append(text)
    if opts["tail"] is not None:
        out = out[-opts["tail"]:] if opts["tail"] else []
    for text in out:
        print(text)
    if opts["dump"]:
        return 0
    sys.stdout.flush()
    while True:  # follow, like logcat without -d
        if fh is None:
            time.sleep(0.2)
            try:
                fh = open(LOG, encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
        line = fh.readline()
        if not line:
            time.sleep(0.1)
            continue
        text = fmt(opts, line)
        if text is not None:
            print(text, flush=True)


if __name__ == "__main__":
    sys.exit(main())
'''
