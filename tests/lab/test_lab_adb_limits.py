"""A real adb server started with a low open-file limit is named before a night that would fill
it (docs/lab-scale.md: a full adb server accepts connections and never answers them)."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess

import pytest
import yaml

from harness.inventory import load_inventory
from harness.lab.adb_limits import adb_server_warnings
from virtual_lab.adb_server import free_port

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb (apt-get install adb)")


@pytest.fixture
def low_limit_server(tmp_path):
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path)}

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    subprocess.run(["adb", "-P", str(port), "start-server"], env=env, preexec_fn=low, check=True,
                   capture_output=True, timeout=30)
    try:
        yield port
    finally:
        subprocess.run(["adb", "-P", str(port), "kill-server"], env=env, capture_output=True, timeout=30)


def _devices(tmp_path, port, n):
    devices = [{"name": f"tcp{i}", "transport": "adb", "serial": f"127.0.0.1:{20000 + i}",
                "adb_server": f"127.0.0.1:{port}", "soc": "SM8750"} for i in range(n)]
    path = tmp_path / "devices.yaml"
    path.write_text(yaml.safe_dump({"devices": devices}), encoding="utf-8")
    return list(load_inventory(path).devices.values())


def test_a_server_the_night_would_fill_is_named(tmp_path, low_limit_server):
    warnings = adb_server_warnings(_devices(tmp_path, low_limit_server, 60), workers=8)
    assert len(warnings) == 1
    assert f"port {low_limit_server}" in warnings[0] and "open-file limit is 64" in warnings[0]
    assert "ulimit -n" in warnings[0]


def test_a_server_with_room_is_not_named(tmp_path, low_limit_server):
    assert adb_server_warnings(_devices(tmp_path, low_limit_server, 4), workers=4) == []
