"""A real labgrid coordinator and one labgrid exporter per lab host, on 127.0.0.1 free ports,
publishing a running virtual lab's devices: an adb device's place holds its lab host's adb
server as a NetworkService named `ADBServer`, an ssh board's place its sshd as `NetworkService`.
`devices_yaml()` writes the harness inventory that claims them through the coordinator."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml


def labgrid_missing() -> str | None:
    for tool in ("labgrid-coordinator", "labgrid-exporter", "labgrid-client"):
        if shutil.which(tool) is None:
            return f"{tool} not found; install the labgrid extra (`pip install 'harness[labgrid]'`)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabgridLab:
    """`with LabgridLab(root, vlab, hosts={"host1": [...names], "host2": [...]}) as lg:`."""

    def __init__(self, root: Path, vlab: Any, hosts: dict[str, list[str]]):
        self.root = Path(root)
        self.vlab = vlab
        self.hosts = hosts
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._procs: list[subprocess.Popen] = []

    # ---- processes ----------------------------------------------------------------------
    def _spawn(self, argv: list[str], log: str) -> subprocess.Popen:
        out = open(self.root / log, "ab")
        try:
            proc = subprocess.Popen(argv, cwd=self.root, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True)
        finally:
            out.close()
        self._procs.append(proc)
        return proc

    def client(self, *args: str, user: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """`labgrid-client -x ADDRESS ARGS` (as another user with `user`, like a person at a desk)."""
        env = dict(os.environ)
        if user:
            env["LG_USERNAME"] = user
        res = subprocess.run(["labgrid-client", "-x", self.address, *args], cwd=self.root, env=env,
                             capture_output=True, text=True, timeout=60)
        if check and res.returncode != 0:
            raise RuntimeError(f"labgrid-client {' '.join(args)} exited {res.returncode}: {res.stderr or res.stdout}")
        return res

    def start(self) -> LabgridLab:
        self.root.mkdir(parents=True, exist_ok=True)
        self._spawn(["labgrid-coordinator", "-l", self.address], "coordinator.log")
        self._wait_port()
        for host, names in self.hosts.items():
            config = self.root / f"exporter-{host}.yaml"
            config.write_text(yaml.safe_dump(self._exporter_config(names)))
            self._spawn(["labgrid-exporter", "-c", self.address, "--name", host, str(config)], f"exporter-{host}.log")
        for host, names in self.hosts.items():
            for name in names:
                self.client("-p", name, "create")
                self.client("-p", name, "add-match", f"{host}/{name}/*")
        self._wait_resources(sum(len(n) for n in self.hosts.values()))
        return self

    def _wait_port(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"labgrid-coordinator did not listen on {self.address}: "
                           f"{(self.root / 'coordinator.log').read_text()[-2000:]}")

    def _wait_resources(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        while time.monotonic() < deadline:
            lines = self.client("resources", check=False).stdout.split()
            if len(lines) >= count:
                return
            time.sleep(0.3)
        raise RuntimeError(f"exporters published {lines}, expected {count} resources")

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self._procs.clear()

    def __enter__(self) -> LabgridLab:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- configuration ------------------------------------------------------------------
    def _exporter_config(self, names: list[str]) -> dict[str, Any]:
        config: dict[str, Any] = {}
        for name in names:
            entry = next(e for e in self.vlab.inventory_entries() if e["name"] == name)
            if entry["transport"] == "adb":
                host, port = entry["adb_server"].rsplit(":", 1)
                config[name] = {"ADBServer": {"cls": "NetworkService", "address": host, "port": int(port),
                                              "username": "harness"}}
            else:
                ssh = entry["ssh"]
                config[name] = {"NetworkService": {"address": ssh["host"], "port": ssh["port"],
                                                   "username": ssh["user"]}}
        return config

    def devices_yaml(self, path: Path, via_ssh: dict[str, dict] | None = None) -> Path:
        """The vlab's devices, each claimed through its labgrid place (named as the device).
        `via_ssh[name]`: reach that device's adb server (the place's address, the lab host's
        loopback) through this ssh login instead of directly."""
        devices = []
        for entry in self.vlab.inventory_entries():
            entry = dict(entry)
            entry["labgrid"] = {"place": entry["name"]}
            if entry["transport"] == "adb":
                entry.pop("adb_server")
                if via_ssh and entry["name"] in via_ssh:
                    entry["adb_server"] = {"via_ssh": via_ssh[entry["name"]]}
            else:
                entry["ssh"] = {k: v for k, v in entry["ssh"].items() if k in ("key", "known_hosts")}
            devices.append(entry)
        path.write_text(yaml.safe_dump({"labgrid": {"coordinator": self.address}, "devices": devices},
                                       sort_keys=False))
        return path

    def show(self, place: str) -> str:
        return self.client("-p", place, "show").stdout

    def holder(self, place: str) -> str | None:
        for line in self.show(place).splitlines():
            if line.strip().startswith("acquired:"):
                value = line.split(":", 1)[1].strip()
                return None if value == "None" else value
        return None


def run_python(code: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen:
    """A child Python with this worktree and tests/lab on its path."""
    here = Path(__file__).resolve().parent
    full = {**os.environ, **(env or {}),
            "PYTHONPATH": os.pathsep.join([str(here), str(here.parents[1])])}
    return subprocess.Popen([sys.executable, "-c", code], env=full, **kw)
