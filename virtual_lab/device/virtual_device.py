"""One emulated Android device (`VirtualDevice`): its sandbox, state files, disk, counters and
faults, served by an adbd on 127.0.0.1 (virtual_lab.adbd, through its contract)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from virtual_lab.adbd.server import AdbdServer
from virtual_lab.device.counters import DeviceCounters
from virtual_lab.device.disk import DiskModel
from virtual_lab.device.layout import LOGCAT_DEVICE_PATH
from virtual_lab.device.sandbox import Sandbox, atomic_write
from virtual_lab.device.spec import DeviceError, VirtualDeviceSpec
from virtual_lab.faults import FaultControlFile, FaultPlan, FaultSettings, Throttle


class VirtualDevice:
    """An emulated Android device reachable as `127.0.0.1:PORT` through `adb connect`."""

    _battery: tuple[int, int]  # (level %, temperature in tenths of a degree C)

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
    def start(self) -> VirtualDevice:
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

    def __enter__(self) -> VirtualDevice:
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
            atomic_write(self.counters_path, json.dumps(self.counters_snapshot(), indent=1, sort_keys=True))

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
        atomic_write(state / "build.prop", props)
        spec = asdict(self.spec)
        spec["props"] = dict(self.spec.props)
        atomic_write(state / "device.json", json.dumps(spec, indent=1, sort_keys=True))
        self._battery = (self.spec.battery_level, self.spec.battery_temperature_decic)
        self._write_battery()
        self.disk.write_state()
        if self.control_path.exists():  # a fresh device starts without faults
            FaultControlFile(self.control_path).write(FaultSettings())
        self.flush_counters()

    def _write_battery(self) -> None:
        level, temp = self._battery
        atomic_write(self.sandbox.state_dir / "battery.prop", f"level={level}\ntemperature={temp}\n")

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
    here = Path(__file__).resolve().parents[1]  # virtual_lab/
    return (here, here.parent / "harness")
