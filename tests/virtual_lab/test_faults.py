"""Fault injection on the emulated device, observed through the REAL adb server and CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from virtual_lab.adb_server import AdbServer
from virtual_lab.device import VirtualDevice, VirtualDeviceSpec
from virtual_lab.faults import FaultControlFile, FaultError, FaultPlan, FaultSettings, Throttle

needs_adb = pytest.mark.skipif(
    shutil.which("adb") is None or shutil.which("bwrap") is None,
    reason="needs the Debian `adb` package and bubblewrap (`bwrap`)")

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def adb_server() -> Iterator[AdbServer]:
    if shutil.which("adb") is None:
        pytest.skip("needs the Debian `adb` package")
    server = AdbServer().start()
    yield server
    server.stop()


@pytest.fixture
def device(tmp_path: Path, adb_server: AdbServer) -> Iterator[VirtualDevice]:
    """A fresh device per test: faults break it on purpose."""
    dev = VirtualDevice(VirtualDeviceSpec(name="faulty"), tmp_path / "faulty").start()
    adb_server.attach(dev.serial)
    yield dev
    adb_server.disconnect(dev.serial)
    dev.stop()


@pytest.fixture
def blob(tmp_path: Path) -> Path:
    path = tmp_path / "blob.bin"
    path.write_bytes(os.urandom(4 * MiB))
    return path


def adb(server: AdbServer, dev: VirtualDevice, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(server.argv("-s", dev.serial, *args), env=server.env(), capture_output=True,
                          text=True, timeout=60)


def wait_until(predicate, seconds: float = 15, what: str = "condition"):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ---- drop ------------------------------------------------------------------------------------
@needs_adb
def test_drop_mid_push_leaves_partial_file_then_recovers(adb_server, device, blob):
    device.faults.drop_after_bytes(1 * MiB)
    res = adb(adb_server, device, "push", str(blob), "/data/local/tmp/model.bin")
    assert res.returncode != 0
    assert device.wait_idle()
    partial = device.host_path("/data/local/tmp/model.bin")
    assert partial.stat().st_size == 1 * MiB  # exactly the bytes let through before the cut
    counters = device.counters_snapshot()
    assert counters["faults"]["drops_fired"] == 1
    assert counters["send_failures"] == 1 and counters["connections_aborted"] == 1
    # The drop is one-shot; the server reconnects by itself or after disconnect + connect.
    if adb_server.state(device.serial) != "device":
        adb_server.reconnect(device.serial)
    res = adb(adb_server, device, "push", str(blob), "/data/local/tmp/model.bin")
    assert res.returncode == 0, res.stderr
    assert partial.read_bytes() == blob.read_bytes()


@needs_adb
def test_drop_without_keep_partial_cleans_up_like_adbd(adb_server, device, blob):
    device.faults.drop_after_bytes(512 * 1024, keep_partial=False)
    assert adb(adb_server, device, "push", str(blob), "/data/local/tmp/gone.bin").returncode != 0
    assert device.wait_idle()
    assert not device.host_path("/data/local/tmp/gone.bin").exists()


@needs_adb
def test_drop_on_any_traffic_cuts_a_pull(adb_server, device, blob, tmp_path):
    shutil.copyfile(blob, device.host_path("/data/local/tmp/pull.bin"))
    device.faults.drop_after_bytes(300_000, scope="any")
    res = adb(adb_server, device, "pull", "/data/local/tmp/pull.bin", str(tmp_path / "out.bin"))
    assert res.returncode != 0
    assert device.wait_idle()
    assert device.counters_snapshot()["faults"]["drops_fired"] == 1


# ---- stderr after stdout ---------------------------------------------------------------------
@needs_adb
def test_stderr_after_stdout_on_v1_shell(adb_server, device):
    script = "echo err1 >&2; echo out1; sleep 0.2; echo err2 >&2; echo out2"
    assert adb(adb_server, device, "shell", "-x", script).stdout in ("err1\nout1\nerr2\nout2\n",
                                                                      "out1\nerr1\nerr2\nout2\n")
    device.faults.stderr_after_stdout(True)
    res = adb(adb_server, device, "shell", "-x", script)
    assert res.stdout == "out1\nout2\nerr1\nerr2\n"
    v2 = adb(adb_server, device, "shell", script)  # shell v2 keeps the streams apart as before
    assert (v2.stdout, v2.stderr) == ("out1\nout2\n", "err1\nerr2\n")
    with pytest.raises(FaultError, match="stderr_after_stdout"):
        FaultSettings.from_dict({"stderr_after_stdout": "yes"})


# ---- offline ---------------------------------------------------------------------------------
@needs_adb
def test_offline_then_recover_with_disconnect_connect(adb_server, device):
    device.faults.offline_for(3)
    wait_until(lambda: adb_server.state(device.serial) == "offline", what="the server to list it offline")
    res = adb(adb_server, device, "shell", "echo", "hi")
    assert res.returncode != 0
    wait_until(lambda: not device.faults.is_offline(), seconds=10, what="the offline window to pass")
    adb_server.reconnect(device.serial)
    assert adb(adb_server, device, "shell", "echo", "back").stdout == "back\n"
    assert device.counters_snapshot()["faults"]["offline_refusals"] >= 1


@needs_adb
def test_restart_on_same_port_comes_back(adb_server, device):
    port = device.port
    device.restart()
    assert device.port == port
    if adb_server.state(device.serial) != "device":
        adb_server.reconnect(device.serial)
    assert adb(adb_server, device, "shell", "echo", "again").stdout == "again\n"


# ---- unauthorized ----------------------------------------------------------------------------
@needs_adb
def test_unauthorized_is_listed_and_recovers_when_allowed(adb_server, tmp_path):
    dev = VirtualDevice(VirtualDeviceSpec(name="locked"), tmp_path / "locked").start()
    try:
        dev.faults.unauthorized()
        adb_server.run("connect", dev.serial, timeout=20)
        adb_server.wait_for_state(dev.serial, "unauthorized")
        res = adb(adb_server, dev, "shell", "echo", "hi")
        assert res.returncode != 0 and "unauthorized" in res.stderr
        assert dev.counters_snapshot()["faults"]["auth_refusals"] >= 1
        dev.faults.unauthorized(False)  # the user taps "Allow"
        adb_server.wait_for_state(dev.serial, "device")
        assert adb(adb_server, dev, "shell", "echo", "ok").stdout == "ok\n"
    finally:
        adb_server.disconnect(dev.serial)
        dev.stop()


# ---- disk full -------------------------------------------------------------------------------
@needs_adb
def test_enospc_fails_push_and_df_agrees(adb_server, device, blob):
    device.faults.set_free_bytes(1 * MiB)
    res = adb(adb_server, device, "push", str(blob), "/data/local/tmp/big.bin")
    assert res.returncode != 0
    assert "No space left on device" in res.stdout + res.stderr
    assert device.wait_idle()
    assert not device.host_path("/data/local/tmp/big.bin").exists()  # adbd unlinks on failure
    df = adb(adb_server, device, "shell", "df", "-k", "/data/local/tmp").stdout.splitlines()
    available_kb = [int(c) for c in df[1].split() if c.isdigit()][2]
    assert available_kb <= 1024
    assert device.counters_snapshot()["send_failures"] == 1

    device.faults.disk_full()
    small = blob.with_name("small.bin")
    small.write_bytes(b"x" * 10)
    assert adb(adb_server, device, "push", str(small), "/data/local/tmp/small.bin").returncode != 0

    device.faults.set_free_bytes(None)
    assert adb(adb_server, device, "push", str(blob), "/data/local/tmp/big.bin").returncode == 0


@needs_adb
def test_small_capacity_spec_fills_up(adb_server, tmp_path, blob):
    dev = VirtualDevice(VirtualDeviceSpec(name="tiny", disk_capacity_bytes=2 * MiB), tmp_path / "tiny").start()
    try:
        adb_server.attach(dev.serial)
        res = adb(adb_server, dev, "push", str(blob), "/data/local/tmp/big.bin")
        assert res.returncode != 0 and "No space left on device" in res.stdout + res.stderr
    finally:
        adb_server.disconnect(dev.serial)
        dev.stop()


# ---- slow link -------------------------------------------------------------------------------
@needs_adb
def test_slow_link_throttles_push(adb_server, device, tmp_path):
    src = tmp_path / "one.bin"
    src.write_bytes(os.urandom(1 * MiB))
    rate = 4 * MiB
    device.faults.slow_link(rate)
    assert adb(adb_server, device, "push", str(src), "/data/local/tmp/slow.bin").returncode == 0
    throttle = device.counters_snapshot()["throttle"]
    assert throttle["bytes_throttled"] >= 1 * MiB
    # The bucket's own bookkeeping: it made the link wait for most of size/rate.
    assert throttle["slept_s"] >= 0.5 * (1 * MiB / rate)
    device.faults.slow_link(None)
    before = device.counters_snapshot()["throttle"]["bytes_throttled"]
    assert adb(adb_server, device, "push", str(src), "/data/local/tmp/fast.bin").returncode == 0
    assert device.counters_snapshot()["throttle"]["bytes_throttled"] == before


# ---- control file (a device in another process) -----------------------------------------------
@needs_adb
def test_control_file_written_by_another_process(adb_server, device, blob):
    code = ("import sys; from pathlib import Path; from virtual_lab.faults import FaultControlFile; "
            "FaultControlFile(Path(sys.argv[1])).update(free_bytes=0)")
    repo = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code, str(device.control_path)], check=True,
                   env={**os.environ, "PYTHONPATH": str(repo)})
    wait_until(lambda: device.faults.settings.free_bytes == 0, seconds=5, what="the control file to apply")
    res = adb(adb_server, device, "push", str(blob), "/data/local/tmp/cf.bin")
    assert "No space left on device" in res.stdout + res.stderr
    FaultControlFile(device.control_path).clear()
    wait_until(lambda: device.faults.settings.free_bytes is None, seconds=5, what="the clear to apply")
    assert adb(adb_server, device, "push", str(blob), "/data/local/tmp/cf.bin").returncode == 0


# ---- unit: plan, settings, throttle -------------------------------------------------------------
def test_drop_budget_is_one_shot_and_scoped():
    plan = FaultPlan()
    plan.drop_after_bytes(100, scope="send")
    assert plan.take_drop_budget(60, "any").fire is False  # other scope: not counted
    first = plan.take_drop_budget(60, "send")
    assert (first.allowed, first.fire) == (60, False)
    second = plan.take_drop_budget(60, "send")
    assert (second.allowed, second.fire, second.keep_partial) == (40, True, True)
    assert plan.take_drop_budget(10_000, "send").fire is False
    assert plan.counters.drops_fired == 1 and plan.settings.drop_after_bytes is None


def test_listeners_see_changes_and_clear_resets():
    plan = FaultPlan()
    seen: list[tuple[FaultSettings, FaultSettings]] = []
    plan.add_listener(lambda old, new: seen.append((old, new)))
    plan.offline_for(5)
    assert plan.is_offline() and 4 < plan.offline_remaining() <= 5
    plan.clear()
    assert not plan.is_offline() and seen[-1][1] == FaultSettings()


def test_bad_settings_are_clear_errors(tmp_path):
    with pytest.raises(FaultError, match="drop_scope"):
        FaultPlan().drop_after_bytes(10, scope="sideways")
    with pytest.raises(FaultError, match="slow_bytes_per_s"):
        FaultPlan().slow_link(-1)
    with pytest.raises(FaultError, match="offline_for"):
        FaultPlan().offline_for(0)
    bad = tmp_path / "faults.json"
    bad.write_text(json.dumps({"free_bytez": 0}))
    with pytest.raises(FaultError, match=r"faults\.json: unknown key"):
        FaultControlFile(bad).read()
    bad.write_text(json.dumps({"free_bytes": -5}))
    with pytest.raises(FaultError, match="free_bytes"):
        FaultControlFile(bad).read()


def test_watch_file_applies_only_new_changes(tmp_path):
    path = tmp_path / "faults.json"
    FaultControlFile(path).update(unauthorized=True)  # written before watching: ignored
    plan = FaultPlan()
    plan.slow_link(1000)
    plan.watch_file(path, interval_s=0.02)
    try:
        time.sleep(0.1)
        assert plan.settings.slow_bytes_per_s == 1000 and not plan.settings.unauthorized
        FaultControlFile(path).update(free_bytes=123)
        wait_until(lambda: plan.settings.free_bytes == 123, seconds=5, what="the watcher")
        assert plan.settings.unauthorized  # the file's whole content now applies
    finally:
        plan.stop_watching()


def test_throttle_accounts_bytes_and_sleep():
    rate = {"v": None}
    throttle = Throttle(lambda: rate["v"])
    throttle.consume(10_000)
    assert throttle.snapshot() == {"bytes_throttled": 0, "slept_s": 0.0}
    rate["v"] = 1_000_000.0
    throttle.consume(50_000)
    throttle.consume(50_000)
    snap = throttle.snapshot()
    assert snap["bytes_throttled"] == 100_000
    # The first 50 kB wait exactly 0.05 s; the second about as long, minus the scheduler's slop.
    assert 0.05 <= snap["slept_s"] <= 0.2


def test_reconnect_tries_a_connect_that_came_to_nothing_again(monkeypatch):
    """The flake of test_drop_mid_push_... under load: one `adb connect` refused while the
    device's listener came back left it "not listed" for the whole wait."""
    from virtual_lab.adb_server import AdbDeviceEntry, AdbServerError

    if shutil.which("adb") is None:
        pytest.skip("no adb on PATH")
    server = AdbServer()
    connects: list[str] = []
    monkeypatch.setattr(server, "disconnect", lambda serial: "")

    def connect(serial, timeout=10):
        connects.append(serial)
        if len(connects) == 1:
            raise AdbServerError(f"connect {serial}: failed to connect (Connection refused)")
        return f"connected to {serial}"

    monkeypatch.setattr(server, "connect", connect)
    monkeypatch.setattr(server, "wait_for_state", lambda serial, state, timeout: AdbDeviceEntry(serial, state, {}))
    assert server.reconnect("127.0.0.1:5555").state == "device" and len(connects) == 2
