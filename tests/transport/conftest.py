"""Fixtures for transport tests: real sshd / adb server on free loopback ports."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.inventory import DeviceSpec, load_inventory
from harness.transport import RetryPolicy


@pytest.fixture
def make_spec(tmp_path: Path) -> Callable[[dict[str, Any]], DeviceSpec]:
    """DeviceSpec from a devices.yaml mapping, validated through the real inventory loader."""
    counter = iter(range(1_000_000))

    def build(entry: dict[str, Any]) -> DeviceSpec:
        path = tmp_path / f"devices-{next(counter)}.yaml"
        path.write_text(yaml.safe_dump({"devices": [entry]}))
        return load_inventory(path).get(entry["name"])

    return build


@pytest.fixture
def fast_retry() -> RetryPolicy:
    """Retries as in production but with short waits, so fault tests stay quick."""
    return RetryPolicy(attempts=4, max_seconds=30, wait_initial=0.05, wait_max=0.5)


@pytest.fixture
def retry_log(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    caplog.set_level(logging.WARNING, logger="harness.transport")

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "transport fault" in r.getMessage()]

    return lines


def _sshd_available() -> bool:
    return Path("/usr/sbin/sshd").exists() and shutil.which("ssh-keygen") is not None


@pytest.fixture(scope="module")
def ssh_board(tmp_path_factory: pytest.TempPathFactory):
    if not _sshd_available():
        pytest.skip("OpenSSH sshd/ssh-keygen not installed (apt-get install openssh-server)")
    from virtual_lab.sshd import VirtualSshBoard

    with VirtualSshBoard(tmp_path_factory.mktemp("sshboard")) as board:
        yield board


@pytest.fixture
def fresh_ssh_board(tmp_path: Path):
    """A board of its own for tests that break it (keys, auth, offline)."""
    if not _sshd_available():
        pytest.skip("OpenSSH sshd/ssh-keygen not installed (apt-get install openssh-server)")
    from virtual_lab.sshd import VirtualSshBoard

    with VirtualSshBoard(tmp_path / "board") as board:
        yield board



# ---- adb: the real Debian adb server in front of emulated adbd devices --------------------
def _adb_lab_available() -> str | None:
    if shutil.which("adb") is None:
        return "the `adb` binary is not installed (apt-get install adb)"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap); the virtual device shell needs it"
    try:
        import virtual_lab.adb_server  # noqa: F401
        import virtual_lab.device  # noqa: F401
    except ImportError as exc:
        return f"virtual_lab adb emulation is not importable: {exc}"
    return None


@pytest.fixture(scope="module")
def adb_server():
    reason = _adb_lab_available()
    if reason:
        pytest.skip(reason)
    from virtual_lab.adb_server import AdbServer as VirtualAdbServer

    with VirtualAdbServer() as server:
        yield server


def _start_device(root: Path, name: str):
    from virtual_lab.device import VirtualDevice, VirtualDeviceSpec

    return VirtualDevice(VirtualDeviceSpec(name=name), root).start()


@pytest.fixture(scope="module")
def phone(adb_server, tmp_path_factory: pytest.TempPathFactory):
    """One emulated phone for the module (not yet `adb connect`ed: the transport does it)."""
    device = _start_device(tmp_path_factory.mktemp("phone"), "op13")
    yield device
    device.stop()


@pytest.fixture
def fresh_phone(adb_server, tmp_path: Path):
    """A phone of its own for tests that inject faults."""
    device = _start_device(tmp_path / "phone", "op13-faulty")
    yield device
    device.stop()


@pytest.fixture
def adb_entry(adb_server) -> Callable[[Any, str], dict[str, Any]]:
    def entry(device: Any, name: str = "op13-virtual") -> dict[str, Any]:
        return {"name": name, "transport": "adb", "serial": device.serial,
                "adb_server": f"127.0.0.1:{adb_server.port}", "soc": "SM8750",
                "work_dir": "/data/local/tmp/harness"}

    return entry
