"""A private, real Debian `adb` server on a free loopback port (never the default 5037).

Every call passes `-P PORT`, so nothing here can start or talk to a server on 5037. The
server's own state (keys, logs) lives under a private HOME so tests never touch ~/.android.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


class AdbServerError(RuntimeError):
    """The adb server could not be started or did not reach the wanted state."""


@dataclass(frozen=True)
class AdbDeviceEntry:
    serial: str
    state: str                  # device | offline | unauthorized | ...
    attrs: dict[str, str]       # product, model, device, transport_id


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class AdbServer:
    """`adb -P PORT start-server` / `connect` / `devices -l` / `kill-server`."""

    def __init__(self, port: int | None = None, *, adb: str = "adb", home: Path | None = None) -> None:
        if port == 5037:
            raise AdbServerError("AdbServer: port 5037 is the user's default adb server; pick another port or None")
        self.port = port or free_port()
        resolved = shutil.which(adb)
        if resolved is None:
            raise AdbServerError(f"AdbServer: `{adb}` not found on PATH; install the Debian `adb` package")
        self.adb = resolved
        self._own_home = home is None
        self.home = Path(home) if home is not None else Path(tempfile.mkdtemp(prefix="vlab-adb-home-"))
        self.started = False

    # ---- plumbing -----------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["HOME"] = str(self.home)  # adb keeps its key pair in $HOME/.android
        env.pop("ANDROID_ADB_SERVER_PORT", None)
        env.pop("ADB_SERVER_SOCKET", None)
        env.pop("ANDROID_SERIAL", None)
        return env

    def argv(self, *args: str) -> list[str]:
        """`adb -P PORT ARGS...` for this server (what tests hand to subprocess)."""
        return [self.adb, "-P", str(self.port), *args]

    def run(self, *args: str, timeout: float = 60, check: bool = False) -> subprocess.CompletedProcess:
        try:
            res = subprocess.run(self.argv(*args), env=self.env(), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise AdbServerError(f"`adb -P {self.port} {' '.join(args)}` did not finish within {timeout}s") from exc
        if check and res.returncode != 0:
            raise AdbServerError(f"`adb -P {self.port} {' '.join(args)}` exited {res.returncode}: "
                                 f"{(res.stderr or res.stdout).strip()}")
        return res

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> AdbServer:
        # start-server listens on localhost only (no -a), and returns once it answers.
        self.run("start-server", timeout=30, check=True)
        self.started = True
        return self

    def stop(self) -> None:
        if self.started:
            try:
                self.run("kill-server", timeout=15)
            except AdbServerError:
                pass
            self.started = False
        if self._own_home:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> AdbServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- devices ------------------------------------------------------------------------
    def connect(self, serial: str, timeout: float = 10) -> str:
        """`adb connect HOST:PORT`; returns adb's message ("connected to ...", "already connected ...")."""
        res = self.run("connect", serial, timeout=timeout + 10)
        text = (res.stdout + res.stderr).strip()
        if res.returncode != 0 or "failed" in text or "unable" in text or "cannot" in text:
            raise AdbServerError(f"adb -P {self.port} connect {serial}: {text}")
        return text

    def disconnect(self, serial: str) -> str:
        res = self.run("disconnect", serial, timeout=15)
        return (res.stdout + res.stderr).strip()

    def reconnect(self, serial: str, state: str = "device", timeout: float = 15) -> AdbDeviceEntry:
        """The recovery a TCP-attached device needs after it went offline. The server does not
        try a disconnected TCP device again by itself: a connect that came to nothing (refused
        while the device's listener came back, on a loaded host) is tried again, every few
        seconds, until `timeout` (one try left it "not listed" for the whole wait)."""
        self.disconnect(serial)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.connect(serial)
                return self.wait_for_state(serial, state, max(0.1, min(3.0, deadline - time.monotonic())))
            except AdbServerError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def devices(self) -> dict[str, AdbDeviceEntry]:
        res = self.run("devices", "-l", timeout=15, check=True)
        return parse_devices_l(res.stdout)

    def state(self, serial: str) -> str | None:
        entry = self.devices().get(serial)
        return entry.state if entry else None

    def wait_for_state(self, serial: str, state: str = "device", timeout: float = 15) -> AdbDeviceEntry:
        deadline = time.monotonic() + timeout
        seen: str | None = None
        while True:
            entry = self.devices().get(serial)
            seen = entry.state if entry else None
            if entry is not None and entry.state == state:
                return entry
            if time.monotonic() >= deadline:
                raise AdbServerError(f"adb -P {self.port}: {serial} is {seen or 'not listed'}, "
                                     f"not {state}, after {timeout}s")
            time.sleep(0.1)

    def attach(self, serial: str, state: str = "device", timeout: float = 15) -> AdbDeviceEntry:
        """connect + wait until the device shows as `state`."""
        self.connect(serial)
        return self.wait_for_state(serial, state, timeout)


def parse_devices_l(text: str) -> dict[str, AdbDeviceEntry]:
    out: dict[str, AdbDeviceEntry] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("List of devices") or line.startswith("*"):
            continue
        parts = line.split()
        if len(parts) < 2:
            continue
        attrs = dict(p.split(":", 1) for p in parts[2:] if ":" in p)
        out[parts[0]] = AdbDeviceEntry(parts[0], parts[1], attrs)
    return out
