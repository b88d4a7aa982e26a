"""The emulated adbd, exercised through the REAL Debian adb server and CLI, and adbutils."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from virtual_lab.adb_server import AdbServer, parse_devices_l
from virtual_lab.adbd.sync import _strtoul
from virtual_lab.device import DeviceError, Sandbox, VirtualDevice, VirtualDeviceSpec

pytestmark = pytest.mark.skipif(
    shutil.which("adb") is None or shutil.which("bwrap") is None,
    reason="needs the Debian `adb` package and bubblewrap (`bwrap`)")


# ---- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def adb_server() -> Iterator[AdbServer]:
    server = AdbServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def device(tmp_path_factory: pytest.TempPathFactory, adb_server: AdbServer) -> Iterator[VirtualDevice]:
    dev = VirtualDevice(VirtualDeviceSpec(name="oneplus13"), tmp_path_factory.mktemp("dev") / "oneplus13")
    dev.start()
    adb_server.attach(dev.serial)
    yield dev
    adb_server.disconnect(dev.serial)
    dev.stop()


def adb(server: AdbServer, dev: VirtualDevice, *args: str, input: bytes | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(server.argv("-s", dev.serial, *args), env=server.env(), input=input,
                          capture_output=True, timeout=timeout)


@pytest.fixture(scope="module")
def adbutils_device(adb_server: AdbServer, device: VirtualDevice):
    adbutils = pytest.importorskip("adbutils")
    return adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(device.serial)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- transport and banner --------------------------------------------------------------------
def test_listed_as_device_with_banner_identity(adb_server, device):
    entry = adb_server.devices()[device.serial]
    assert entry.state == "device"
    assert entry.attrs["product"] == "sun"
    assert entry.attrs["model"] == "CPH2653"
    assert entry.attrs["device"] == "OP5D0DL1"


def test_features_advertise_only_what_is_implemented(adbutils_device):
    # `host-serial:SERIAL:features`: what the server recorded from the CNXN banner.
    features = {f.strip() for f in adbutils_device.get_features().split(",")}
    assert features == {"shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir"}


def test_parse_devices_l():
    text = ("List of devices attached\n127.0.0.1:5555         device product:sun model:CPH2653 "
            "device:OP5D0DL1 transport_id:1\n127.0.0.1:5556         unauthorized transport_id:2\n\n")
    parsed = parse_devices_l(text)
    assert parsed["127.0.0.1:5555"].state == "device"
    assert parsed["127.0.0.1:5555"].attrs["model"] == "CPH2653"
    assert parsed["127.0.0.1:5556"].state == "unauthorized"


# ---- shell -----------------------------------------------------------------------------------
def test_shell_echo(adb_server, device):
    res = adb(adb_server, device, "shell", "echo", "hi")
    assert (res.returncode, res.stdout) == (0, b"hi\n")


def test_shell_v2_exit_codes_and_signals(adb_server, device):
    assert adb(adb_server, device, "shell", "exit 3").returncode == 3
    assert adb(adb_server, device, "shell", "false").returncode == 1
    assert adb(adb_server, device, "shell", "kill -SEGV $$").returncode == 139


def test_shell_v2_keeps_stderr_apart(adb_server, device):
    res = adb(adb_server, device, "shell", "echo out; echo err >&2")
    assert res.stdout == b"out\n" and res.stderr == b"err\n"


def test_shell_v1_merges_output_and_loses_exit_code_like_a_real_device(adb_server, device):
    res = adb(adb_server, device, "shell", "-x", "echo v1; echo e >&2; exit 4")
    assert res.returncode == 0
    assert res.stdout == b"v1\ne\n"


def test_shell_stdin_is_forwarded(adb_server, device):
    res = adb(adb_server, device, "shell", "cat; echo done", input=b"hello stdin\n")
    assert res.stdout == b"hello stdin\ndone\n"


def test_exec_out_service(adb_server, device):
    res = adb(adb_server, device, "exec-out", "printf 'a\\0b'")
    assert res.returncode == 0 and res.stdout == b"a\0b"


def test_large_shell_output_is_complete(adb_server, device):
    # No `tr`: Debian's toybox lacks it, so the virtual phone does too (virtual_lab.userland).
    res = adb(adb_server, device, "shell", "yes xxxxxxxxx | head -c 3000000")
    assert res.returncode == 0 and res.stdout == b"xxxxxxxxx\n" * 300_000


def test_unknown_service_is_refused(adb_server, device):
    before = device.counters_snapshot()["service_opens"].get("refused", 0)
    res = adb(adb_server, device, "reboot")
    assert res.returncode != 0
    assert device.counters_snapshot()["service_opens"].get("refused", 0) == before + 1


# ---- props and helpers -----------------------------------------------------------------------
def test_getprop(adb_server, device):
    assert adb(adb_server, device, "shell", "getprop", "ro.soc.model").stdout == b"SM8750\n"
    assert adb(adb_server, device, "shell", "getprop", "no.such.prop").stdout == b"\n"
    listing = adb(adb_server, device, "shell", "getprop").stdout.decode()
    assert "[ro.product.model]: [CPH2653]" in listing.splitlines()
    assert "[sys.boot_completed]: [1]" in listing.splitlines()


def test_extra_props_override_and_validation(tmp_path):
    spec = VirtualDeviceSpec(name="x", props={"ro.soc.model": "SM8650", "debug.vlab": "on"})
    assert spec.all_props()["ro.soc.model"] == "SM8650"
    assert spec.all_props()["debug.vlab"] == "on"
    with pytest.raises(DeviceError, match="model"):
        VirtualDeviceSpec(name="x", model="bad;model")
    with pytest.raises(DeviceError, match="unknown key"):
        VirtualDeviceSpec.from_dict({"name": "x", "sco_model": "SM8750"})


def test_dumpsys_battery_follows_set_battery(adb_server, device):
    out = adb(adb_server, device, "shell", "dumpsys", "battery").stdout.decode()
    assert "  level: 85" in out.splitlines() and "  temperature: 312" in out.splitlines()
    device.set_battery(level=42, temperature_decic=415)
    try:
        out = adb(adb_server, device, "shell", "dumpsys battery").stdout.decode()
        assert "  level: 42" in out.splitlines() and "  temperature: 415" in out.splitlines()
    finally:
        device.set_battery(level=85, temperature_decic=312)


def _df_numbers(text: str) -> list[int]:
    return [int(c) for c in text.splitlines()[1].split() if c.isdigit()]


def test_df_reports_virtual_capacity_and_usage(adb_server, device, tmp_path):
    capacity_kb = device.spec.disk_capacity_bytes // 1024
    size_kb, used_kb, free_kb = _df_numbers(adb(adb_server, device, "shell", "df -k /data/local/tmp").stdout.decode())
    assert size_kb == capacity_kb and used_kb + free_kb == capacity_kb
    blob = tmp_path / "df.bin"
    blob.write_bytes(b"\0" * 2_000_000)
    assert adb(adb_server, device, "push", str(blob), "/data/local/tmp/df.bin").returncode == 0
    try:
        _, used2, free2 = _df_numbers(adb(adb_server, device, "shell", "df -k /data").stdout.decode())
        assert free_kb - free2 >= 1950 and used2 - used_kb >= 1950
    finally:
        device.host_path("/data/local/tmp/df.bin").unlink()


def test_logcat_reads_the_runtime_log(adb_server, device):
    assert adb(adb_server, device, "shell", "logcat", "-c").returncode == 0
    device.log("LlmDemo", "prefill done", "I", pid=4242)
    device.log("Noise", "chatter", "D", pid=7)
    both = adb(adb_server, device, "shell", "logcat", "-d").stdout.decode()
    assert "LlmDemo" in both and "Noise" in both
    only = adb(adb_server, device, "shell", "logcat", "-d", "-s", "LlmDemo").stdout.decode().splitlines()
    assert len(only) == 1 and "prefill done" in only[0] and "4242" in only[0]
    brief = adb(adb_server, device, "shell", "logcat", "-d", "-v", "brief", "*:I").stdout.decode()
    assert brief.splitlines() == ["I/LlmDemo( 4242): prefill done"]
    adb(adb_server, device, "shell", "logcat", "-c")
    assert adb(adb_server, device, "shell", "logcat", "-d").stdout == b""


def test_vendor_tree_and_fastrpc_placeholder(adb_server, device):
    res = adb(adb_server, device, "shell", "ls /vendor/lib64/libcdsprpc.so && test -d /vendor/lib/rfsa/adsp && echo ok")
    assert res.stdout.decode().split() == ["/vendor/lib64/libcdsprpc.so", "ok"]


def test_python_runs_inside_the_sandbox(device):
    import sys
    res = device.shell(f"{os.path.realpath(sys.executable)} -c 'import json, sys; print(sys.version_info[0])'")
    assert (res.returncode, res.stdout) == (0, b"3\n")


# ---- confinement -----------------------------------------------------------------------------
def test_shell_cannot_write_host_files(adb_server, device):
    before = Path("/etc/passwd").read_bytes()
    res = adb(adb_server, device, "shell", "echo pwned >> /etc/passwd")
    assert res.returncode != 0 and b"Read-only file system" in res.stderr
    res = adb(adb_server, device, "shell", "echo x > /system/bin/evil")
    assert res.returncode != 0
    assert Path("/etc/passwd").read_bytes() == before


def test_data_local_tmp_is_the_sandbox(adb_server, device):
    marker = device.host_path("/data/local/tmp") / "from-host.txt"
    marker.write_text("sandbox")
    try:
        res = adb(adb_server, device, "shell", "ls /data/local/tmp; cat /data/local/tmp/from-host.txt")
        assert "from-host.txt" in res.stdout.decode().split() and res.stdout.decode().endswith("sandbox")
        adb(adb_server, device, "shell", "echo made-inside > /data/local/tmp/inside.txt")
        assert (device.root / "data/local/tmp/inside.txt").read_text() == "made-inside\n"
    finally:
        marker.unlink()
        (device.root / "data/local/tmp/inside.txt").unlink(missing_ok=True)


def test_sync_cannot_escape_through_symlinks(adb_server, device, tmp_path):
    tmp = device.host_path("/data/local/tmp")
    (tmp / "abs-link").symlink_to("/etc/passwd")
    (tmp / "rel-link").symlink_to("../../../../../../etc/passwd")
    try:
        for link in ("abs-link", "rel-link"):
            res = adb(adb_server, device, "pull", f"/data/local/tmp/{link}", str(tmp_path / link))
            assert res.returncode != 0, res.stdout
        blob = tmp_path / "blob"
        blob.write_bytes(b"not for the host")
        before = Path("/etc/passwd").read_bytes()
        assert adb(adb_server, device, "push", str(blob), "/data/local/tmp/abs-link").returncode == 0
        assert Path("/etc/passwd").read_bytes() == before
        assert (tmp / "abs-link").read_bytes() == b"not for the host"  # replaced the link, as adbd does
        assert adb(adb_server, device, "push", str(blob), "/etc/passwd").returncode != 0
        assert Path("/etc/passwd").read_bytes() == before
    finally:
        for name in ("abs-link", "rel-link"):
            (tmp / name).unlink(missing_ok=True)


def test_sandbox_resolve_and_host_path(tmp_path):
    sb = Sandbox(tmp_path / "root")
    sb.create()
    (sb.root / "data/local/tmp/up").symlink_to("..")
    assert sb.resolve("/data/local/tmp/up/tmp").device == "/data/local/tmp"
    assert sb.resolve("/data/../etc/passwd").host is None
    assert sb.resolve("/").is_root
    assert sb.resolve("/system/etc/vlab/build.prop").host == sb.root / "state/build.prop"
    assert not sb.resolve("/system/bin/x").writable and sb.resolve("/sdcard/x").writable
    with pytest.raises(DeviceError, match="outside the sandbox"):
        sb.host_path("/etc/passwd")


# ---- files through the adb CLI ---------------------------------------------------------------
def test_push_pull_round_trip_with_awkward_name(adb_server, device, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    remote = "/data/local/tmp/a dir/we ird;name $x.bin"
    before = device.counters_snapshot()
    res = adb(adb_server, device, "push", str(src), remote)
    assert res.returncode == 0, res.stderr
    assert device.host_path(remote).read_bytes() == src.read_bytes()
    back = tmp_path / "back.bin"
    res = adb(adb_server, device, "pull", remote, str(back))
    assert res.returncode == 0, res.stderr
    assert sha256(back) == sha256(src)
    assert device.wait_idle()
    after = device.counters_snapshot()
    assert after["send_bytes"] - before["send_bytes"] == src.stat().st_size
    assert after["recv_bytes"] - before["recv_bytes"] == src.stat().st_size
    assert after["send_files"] == before["send_files"] + 1
    listing = adb(adb_server, device, "ls", "/data/local/tmp/a dir").stdout.decode()
    assert listing.rstrip("\n").endswith("we ird;name $x.bin")
    shutil.rmtree(device.host_path("/data/local/tmp/a dir"))


def test_push_mode_and_mtime_follow_adbd(adb_server, device, tmp_path):
    src = tmp_path / "tool"
    src.write_bytes(b"#!/bin/sh\necho tool-ran\n")
    src.chmod(0o700)
    os.utime(src, (1_700_000_000, 1_700_000_000))
    assert adb(adb_server, device, "push", str(src), "/data/local/tmp/bin/tool").returncode == 0
    st = device.host_path("/data/local/tmp/bin/tool").stat()
    assert stat.S_IMODE(st.st_mode) == 0o777  # adbd copies the user bits to group and other
    assert int(st.st_mtime) == 1_700_000_000
    assert adb(adb_server, device, "shell", "/data/local/tmp/bin/tool").stdout == b"tool-ran\n"
    shutil.rmtree(device.host_path("/data/local/tmp/bin"))


def test_push_replaces_existing_file(adb_server, device, tmp_path):
    target = device.host_path("/data/local/tmp/replace.txt")
    target.write_text("old content that is longer")
    src = tmp_path / "new.txt"
    src.write_text("new")
    assert adb(adb_server, device, "push", str(src), "/data/local/tmp/replace.txt").returncode == 0
    assert target.read_text() == "new"
    target.unlink()


def test_pull_missing_file_fails(adb_server, device, tmp_path):
    res = adb(adb_server, device, "pull", "/data/local/tmp/nope.bin", str(tmp_path / "x"))
    assert res.returncode != 0 and b"No such file or directory" in res.stdout + res.stderr


def test_recv_of_a_folder_fails_like_aosp_adbd(adbutils_device, device, tmp_path):
    """AOSP recv_impl: open(O_RDONLY) of a folder succeeds, the read fails: `FAIL read failed:
    Is a directory` (not a closed stream, which a client would take for a dropped link)."""
    from adbutils.errors import AdbError

    device.host_path("/data/local/tmp/a folder").mkdir(exist_ok=True)
    with pytest.raises(AdbError, match="read failed: Is a directory"):
        b"".join(adbutils_device.sync.iter_content("/data/local/tmp/a folder"))  # a bare RECV
    assert adbutils_device.shell("echo still here") == "still here"


def test_counters_are_persisted_and_readable_in_the_device_shell(adb_server, device):
    res = adb(adb_server, device, "shell", "vlabstat")
    inside = json.loads(res.stdout)
    on_host = json.loads(device.counters_path.read_text())
    assert inside["send_bytes"] == on_host["send_bytes"] >= 0
    assert inside["service_opens"]["shell_v2"] >= 1


# ---- adbutils ----------------------------------------------------------------------------------
def test_adbutils_shell_and_props(adbutils_device):
    d = adbutils_device
    assert d.shell("echo hi") == "hi"
    assert d.prop.model == "CPH2653"
    assert d.getprop("ro.soc.model") == "SM8750"


def test_adbutils_shell2_exit_codes_v1_and_v2(adbutils_device):
    r = adbutils_device.shell2("echo out; echo err >&2; exit 7", v2=True)
    assert (r.returncode, r.stdout, r.stderr) == (7, "out\n", "err\n")
    r = adbutils_device.shell2("sh -c 'exit 5'")  # v1 path with adbutils' exit marker
    assert r.returncode == 5


def test_adbutils_sync_push_pull_stat_list(adbutils_device, device, tmp_path):
    d = adbutils_device
    data = os.urandom(300_000)
    src = tmp_path / "u.bin"
    src.write_bytes(data)
    d.sync.push(str(src), "/data/local/tmp/au/u.bin")
    info = d.sync.stat("/data/local/tmp/au/u.bin")
    assert info.size == len(data) and stat.S_ISREG(info.mode)
    assert d.sync.stat("/data/local/tmp/au/missing").mode == 0
    names = {e.path for e in d.sync.list("/data/local/tmp/au")}
    assert "u.bin" in names
    d.sync.pull("/data/local/tmp/au/u.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == data
    assert {e.path for e in d.sync.list("/")} >= {"data", "vendor", "system", "sdcard"}
    shutil.rmtree(device.host_path("/data/local/tmp/au"))


def test_concurrent_streams_and_connections(adb_server, device, adbutils_device, tmp_path):
    adbutils = pytest.importorskip("adbutils")
    errors: list[str] = []

    def worker(i: int) -> None:
        try:
            d = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(device.serial)
            data = os.urandom(150_000 + i)
            for k in range(2):
                d.sync.push(data, f"/data/local/tmp/conc{i}.bin")
                if d.sync.read_bytes(f"/data/local/tmp/conc{i}.bin") != data:
                    errors.append(f"{i}: content mismatch")
                r = d.shell2(f"echo {i}-{k}; exit {i % 5}", v2=True)
                if (r.returncode, r.stdout) != (i % 5, f"{i}-{k}\n"):
                    errors.append(f"{i}: {r}")
        except Exception as exc:  # collected and asserted below
            errors.append(f"{i}: {exc!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    # A second adb server attached to the same device at the same time.
    with AdbServer() as second:
        second.attach(device.serial)
        res = subprocess.run(second.argv("-s", device.serial, "shell", "echo", "second"), env=second.env(),
                             capture_output=True, timeout=60)
        assert res.stdout == b"second\n"
    for t in threads:
        t.join()
    assert errors == []
    for i in range(8):
        device.host_path(f"/data/local/tmp/conc{i}.bin").unlink()


# ---- processes -----------------------------------------------------------------------------------
def _proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return None


def _wait_gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _proc_state(pid) in (None, "Z"):
            return True
        time.sleep(0.05)
    return False


def test_background_process_survives_and_can_be_killed_later(adb_server, device):
    res = adb(adb_server, device, "shell", "sleep 60 > /dev/null 2>&1 & echo $!")
    pid = int(res.stdout)
    assert _proc_state(pid) not in (None, "Z")
    assert adb(adb_server, device, "shell", f"kill -0 {pid}").returncode == 0
    assert adb(adb_server, device, "shell", f"kill -9 {pid}").returncode == 0
    assert _wait_gone(pid)


def test_client_hangup_stops_the_command(adbutils_device, device):
    adbutils = pytest.importorskip("adbutils")
    pid_file = device.host_path("/data/local/tmp/hang.pid")
    with pytest.raises(adbutils.AdbTimeout):
        adbutils_device.shell("echo $$ > /data/local/tmp/hang.pid; exec sleep 30", timeout=1)
    pid = int(pid_file.read_text())
    assert _wait_gone(pid)
    pid_file.unlink()


def test_strtoul_like_adbd():
    assert _strtoul("33188") == 33188
    assert _strtoul("0755") == 0o755
    assert _strtoul("0x1ed") == 0x1ED
    assert _strtoul("zz") is None


def test_a_shell_starts_with_default_signals_whatever_the_host_ignores(device):
    """A lab host run under `nohup` ignores SIGHUP, and an ignored signal survives exec: the device's
    shells would then outlive a client's hang-up (seen: make test under nohup). A device's adbd
    starts each shell with every signal at its default action."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        res = device.sandbox.run("grep SigIgn /proc/self/status")
    finally:
        signal.signal(signal.SIGHUP, previous)
    ignored = int(res.stdout.decode().split()[1], 16)
    assert not ignored & (1 << (signal.SIGHUP - 1)), res.stdout


def test_sandbox_runs_an_interpreter_reached_through_a_symlinked_venv(tmp_path, monkeypatch):
    # Issue 44: a venv reached through a link (its target elsewhere) made every virtual llm_demo
    # exit 127: the runtime's `#!` names the link's path, the sandbox bound only the target.
    real_prefix = Path(os.path.realpath(sys.prefix))
    link = tmp_path / "linked-venv"
    link.symlink_to(real_prefix, target_is_directory=True)
    if real_prefix.is_relative_to("/usr") or not Path(sys.executable).is_relative_to(sys.prefix):
        pytest.skip("the interpreter is not in a folder of its own (a venv) to reach through a link")
    exe = link / Path(sys.executable).relative_to(sys.prefix)
    if not exe.exists():
        pytest.skip("the interpreter is not in a folder of its own (a venv) to reach through a link")
    monkeypatch.setattr(sys, "executable", str(exe))
    monkeypatch.setattr(sys, "prefix", str(link))
    sb = Sandbox(tmp_path / "root")
    sb.create()
    res = sb.run(f"{shlex.quote(str(exe))} -c 'import sys; print(sys.prefix)'", timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().strip() == str(link)
