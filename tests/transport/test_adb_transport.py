"""AdbTransport through the real Debian adb server to the emulated adbd (virtual_lab)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness.errors import (
    ConnectionDropped,
    DeviceOfflineError,
    DeviceUnauthorizedError,
    RemoteNoSpaceError,
    RemotePathError,
)
from harness.transport import AdbTransport, LinkState, RetryPolicy, is_tcp_serial

WORK = "/data/local/tmp/harness"


@pytest.fixture
def adb(phone, adb_entry, make_spec, fast_retry):
    with AdbTransport(make_spec(adb_entry(phone)), retry=fast_retry) as t:
        yield t


@pytest.fixture
def adb_v1(phone, adb_entry, make_spec, fast_retry):
    """The same phone through the v1 `shell:` path (exit marker, merged streams)."""
    with AdbTransport(make_spec(adb_entry(phone)), retry=fast_retry, shell_v2=False) as t:
        yield t


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_tcp_serial_detection():
    assert is_tcp_serial("127.0.0.1:5555") and is_tcp_serial("lab-host.example:40001")
    assert not is_tcp_serial("R5CX1234567") and not is_tcp_serial("emulator-5554")


def test_connects_on_demand_and_reads_features(adb, adb_server, phone):
    assert adb.adb_state() in ("device", "absent")  # fresh server: not connected yet, or by an earlier test
    assert adb.shell(["echo", "hi"]).stdout == "hi\n"
    assert adb_server.state(phone.serial) == "device"
    assert "shell_v2" in adb.features() and adb.uses_shell_v2()
    assert all("\0" not in f for f in adb.features())


def test_shell_v2_exit_codes_and_streams(adb):
    res = adb.shell(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (res.exit_code, res.stdout, res.stderr) == (3, "out\n", "err\n")
    assert adb.shell(["sh", "-c", "kill -SEGV $$"]).exit_code == 139
    assert adb.shell(["true"]).ok


def test_shell_v1_exit_codes_with_safe_marker(adb_v1):
    assert not adb_v1.uses_shell_v2()
    res = adb_v1.shell(["sh", "-c", "echo out; printf err >&2; exit 3"])
    assert res.exit_code == 3 and res.stdout == "out\nerr" and res.stderr == ""  # merged on v1
    # Output that imitates adbutils' marker (and ends without a newline) cannot fool ours.
    res = adb_v1.shell(["sh", "-c", "printf 'X4EXIT:0\\nX4EXIT-00:0'; exit 5"])
    assert (res.exit_code, res.stdout) == (5, "X4EXIT:0\nX4EXIT-00:0")
    assert adb_v1.shell(["sh", "-c", "kill -ABRT $$"]).exit_code == 134


@pytest.mark.parametrize("fixture", ["adb", "adb_v1"])
def test_arguments_stay_literal(fixture, request, phone):
    t = request.getfixturevalue(fixture)
    t.makedirs(WORK)
    keep = f"{WORK}/keep"
    phone.host_path(keep).write_text("precious")
    res = t.shell(["echo", "'; rm -rf /data #", f"; rm -f {keep}", "$(id)", "a  b"], check=True)
    assert res.stdout == f"'; rm -rf /data # ; rm -f {keep} $(id) a  b\n"
    assert phone.host_path(keep).read_text() == "precious"


def test_cwd_and_env(adb):
    adb.makedirs(f"{WORK}/dir with space")
    res = adb.shell(["sh", "-c", 'pwd; echo "$MODEL_DIR"'], cwd=f"{WORK}/dir with space",
                    env={"MODEL_DIR": "/data/x; y"}, check=True)
    assert res.stdout.splitlines() == [f"{WORK}/dir with space", "/data/x; y"]


def test_push_pull_roundtrip_with_odd_names(adb, phone, tmp_path):
    src = tmp_path / "weights; part 1.bin"
    src.write_bytes(os.urandom(5 * 1024 * 1024 + 3))
    remote = f"{WORK}/model dir; v2/weights; part 1.bin"  # parents created by the device
    seen: list[int] = []
    assert adb.push(src, remote, mode=0o644, progress=seen.append) == src.stat().st_size
    # Full-size sync messages: 8-byte header + payload = 64 KiB, as the adb CLI sends them.
    assert sum(seen) == src.stat().st_size and max(seen) == 64 * 1024 - 8
    assert _sha(phone.host_path(remote)) == _sha(src)
    st = adb.stat(remote)
    assert st is not None and st.is_file and st.size == src.stat().st_size
    back = tmp_path / "back.bin"
    assert adb.pull(remote, back) == src.stat().st_size
    assert _sha(back) == _sha(src)
    assert adb.sha256(remote) == _sha(src)


def test_push_empty_file_and_mode(adb, phone, tmp_path):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert adb.push(empty, f"{WORK}/empty") == 0
    assert adb.stat(f"{WORK}/empty").size == 0
    tool = tmp_path / "tool.sh"
    tool.write_text("#!/system/bin/sh\necho tool ran\n")
    adb.push(tool, f"{WORK}/bin/tool.sh", mode=0o755)
    assert adb.shell([f"{WORK}/bin/tool.sh"], check=True).stdout == "tool ran\n"


def test_stat_exists_rename_remove_free(adb, tmp_path):
    assert adb.stat(f"{WORK}/absent") is None and not adb.exists(f"{WORK}/absent")
    adb.makedirs(WORK)
    assert adb.stat(WORK).is_dir
    f = tmp_path / "f"
    f.write_text("x")
    adb.push(f, f"{WORK}/f.tmp")
    adb.rename(f"{WORK}/f.tmp", f"{WORK}/f")
    assert adb.exists(f"{WORK}/f") and not adb.exists(f"{WORK}/f.tmp")
    adb.remove(f"{WORK}/f")
    assert not adb.exists(f"{WORK}/f")
    assert adb.free_bytes(WORK) > 0


def test_stat_many_by_folder_listing_agrees_with_one_stat_per_path(adb, phone):
    """Many files in few folders are found in a LIS2 listing of each folder; every answer
    (file, link followed, dangling link, absent name, absent folder, a file as a folder,
    odd names) must be what a STA2 of that one path says."""
    base = f"{WORK}/lst"
    adb.shell(["rm", "-rf", base], check=True)
    adb.makedirs(f"{base}/sub")
    host = phone.host_path(base)
    for name in ("a", " b ", "c'q", "-d", "sub/e", "sub/f"):
        (host / name).write_text(name)
    os.chmod(host / "a", 0o755)
    os.symlink("a", host / "link")
    os.symlink("nowhere", host / "dangling")
    os.symlink("sub", host / "subdir-link")
    names = ["a", " b ", "c'q", "-d", "link", "dangling", "absent", "sub", "sub/e", "sub/f", "sub/absent",
             "subdir-link/e", "nofolder/x", "nofolder/y", "a/z", "."]
    paths = [f"{base}/{n}" for n in names]
    before = dict(phone.counters.snapshot()["sync_requests"])
    many = adb.stat_many(paths)
    after = phone.counters.snapshot()["sync_requests"]
    assert after.get("LIS2", 0) > before.get("LIS2", 0)  # the listing path was taken
    one = {p: adb.stat(p) for p in paths}
    assert many == one
    assert one[f"{base}/link"].is_file and one[f"{base}/dangling"] is None and one[f"{base}/nofolder/x"] is None
    assert one[f"{base}/a"].mode & 0o777 == 0o755 and one[f"{base}/sub"].is_dir


def test_pull_missing_is_a_path_error(adb, tmp_path):
    with pytest.raises(RemotePathError, match=f"op13-virtual.*{WORK}/missing"):
        adb.pull(f"{WORK}/missing", tmp_path / "missing")
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("fixture", ["adb", "adb_v1"])
def test_timeout_kills_the_device_process_by_pid(fixture, request):
    t = request.getfixturevalue(fixture)
    t.makedirs(WORK)
    marker = f"{WORK}/sleeper-{fixture}.pid"
    res = t.shell(["sh", "-c", f"echo $$ > '{marker}'; exec sleep 60"], timeout=1.0)
    assert res.timed_out and not res.ok
    pid = int(t.shell(["cat", marker], check=True).stdout)
    assert not t.is_running(pid)


def test_spawned_background_process_kill(adb):
    adb.makedirs(WORK)
    pid = int(adb.shell(["sh", "-c", "sleep 60 > /dev/null 2>&1 & echo $!"], check=True).stdout)
    assert adb.is_running(pid)
    assert adb.kill(pid) and not adb.is_running(pid)


def test_facts_and_health(adb):
    facts = adb.facts()
    assert facts["model"] == "CPH2653" and facts["reported_soc_model"] == "SM8750"
    assert facts["soc_model"] == "SM8750" and facts["android_release"] == "15"
    report = adb.health()
    assert report.ok, report.problems
    assert report.state is LinkState.OK  # the server's `device` state, in the one spelling of all links
    assert report.device_facts.battery_pct == 85 and report.device_facts.battery_temp_c == 31.2
    assert report.device_facts.free_bytes > 0


def test_device_facts_from_the_phone(fresh_phone, adb_entry, make_spec):
    """getprop for boot, `dumpsys battery` for level and temperature, df in the work folder's
    nearest existing folder (it does not exist before the first push)."""
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-facts"))) as t:
        facts = t.device_facts()
        assert facts.boot_completed is True
        assert (facts.battery_pct, facts.battery_temp_c) == (85, 31.2)
        assert facts.free_path == "/data/local/tmp" and facts.free_bytes > 0
        fresh_phone.set_battery(level=9, temperature_decic=441)
        fresh_phone.faults.set_free_bytes(3 << 20)
        t.makedirs(WORK)
        facts = t.device_facts()
        assert (facts.battery_pct, facts.battery_temp_c) == (9, 44.1)
        assert facts.free_path == WORK and facts.free_bytes <= 3 << 20


def test_health_flags_a_device_that_has_not_booted(adb_server, adb_entry, make_spec, tmp_path):
    from virtual_lab.device import VirtualDevice, VirtualDeviceSpec

    spec = VirtualDeviceSpec(name="booting", props={"sys.boot_completed": "0"})
    with VirtualDevice(spec, tmp_path / "booting") as device:
        with AdbTransport(make_spec(adb_entry(device, "booting"))) as t:
            report = t.health()
    assert report.reachable and not report.ok
    assert any("sys.boot_completed" in p for p in report.problems)
    assert report.device_facts.boot_completed is False


# ---- faults -------------------------------------------------------------------------------
def test_drop_mid_push_is_retried_with_a_log_line(fresh_phone, adb_entry, make_spec, fast_retry, retry_log,
                                                  tmp_path):
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(4 * 1024 * 1024))
    fresh_phone.faults.drop_after_bytes(1024 * 1024)
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-drop")), retry=fast_retry) as t:
        assert t.push(src, f"{WORK}/big.bin") == src.stat().st_size
        assert t.sha256(f"{WORK}/big.bin") == _sha(src)
    assert fresh_phone.faults.counters.drops_fired == 1
    lines = retry_log()
    assert len(lines) == 1 and "push big.bin" in lines[0] and "op13-drop" in lines[0]


def _tree(root: Path, files: int, size: int) -> dict[str, str]:
    shas = {}
    for i in range(files):
        f = root / ("sub dir" if i % 2 else "") / f"part {i}; x.bin"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(os.urandom(size + i))
        shas[f.relative_to(root).as_posix()] = _sha(f)
    return shas


def test_push_tree_one_session_roundtrip(adb, phone, tmp_path):
    shas = _tree(tmp_path / "tree", 7, 300_000)
    seen: list[int] = []
    sent = adb.push_tree(tmp_path / "tree", f"{WORK}/tree one", progress=seen.append)
    assert sent == sum(300_000 + i for i in range(7)) == sum(seen)
    assert adb.list_files(f"{WORK}/tree one") == sorted(shas)
    for rel, sha in shas.items():
        assert _sha(phone.host_path(f"{WORK}/tree one/{rel}")) == sha
    (tmp_path / "empty").mkdir()
    assert adb.push_tree(tmp_path / "empty", f"{WORK}/empty tree") == 0
    assert adb.stat(f"{WORK}/empty tree").is_dir


def test_push_tree_drop_resumes_unacknowledged_files(fresh_phone, adb_entry, make_spec, fast_retry, retry_log,
                                                     tmp_path):
    shas = _tree(tmp_path / "tree", 6, 512 * 1024)
    fresh_phone.faults.drop_after_bytes(3 * 512 * 1024 + 1000)  # mid fourth file
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-tree")), retry=fast_retry) as t:
        t.push_tree(tmp_path / "tree", f"{WORK}/tree")
        for rel, sha in shas.items():
            assert t.sha256(f"{WORK}/tree/{rel}") == sha
    assert fresh_phone.faults.counters.drops_fired == 1
    lines = retry_log()
    # One drop, so one fault of the push; on a loaded machine the adb server may take longer to
    # see the device again than the first retry waits, a second (reconnect) fault of the same device.
    assert lines and "op13-tree" in lines[0] and "files acknowledged" in lines[0]
    assert all("op13-tree" in ln and "files acknowledged" not in ln for ln in lines[1:]), lines


def test_push_tree_no_space_names_the_file(fresh_phone, adb_entry, make_spec, fast_retry, tmp_path):
    _tree(tmp_path / "tree", 4, 512 * 1024)
    fresh_phone.faults.set_free_bytes(1024 * 1024 + 100_000)
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-treefull")), retry=fast_retry) as t:
        with pytest.raises(RemoteNoSpaceError, match=rf"op13-treefull.*{WORK}/tree/.*part \d; x\.bin"):
            t.push_tree(tmp_path / "tree", f"{WORK}/tree")


def test_drop_without_retries_is_classified(fresh_phone, adb_entry, make_spec, tmp_path):
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(2 * 1024 * 1024))
    fresh_phone.faults.drop_after_bytes(256 * 1024)
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-drop1")), retry=RetryPolicy(attempts=1)) as t:
        with pytest.raises(ConnectionDropped, match="op13-drop1.*push of"):
            t.push(src, f"{WORK}/big.bin")


def test_offline_for_a_while_then_reconnects(fresh_phone, adb_entry, make_spec, retry_log, adb_server):
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-offline")),
                      retry=RetryPolicy(attempts=8, max_seconds=30, wait_initial=0.2, wait_max=1.0),
                      connect_wait_s=1.0) as t:
        assert t.shell(["echo", "before"]).stdout == "before\n"
        fresh_phone.faults.offline_for(2.0)
        # Once the server lists the device gone, a command is refused before it reaches the device
        # (retried); one sent in the instant before may have started (CommandOutcomeUnknown).
        deadline = time.monotonic() + 10
        while adb_server.state(fresh_phone.serial) == "device" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert t.shell(["echo", "after"]).stdout == "after\n"
    assert retry_log(), "the offline window should have cost at least one logged retry"
    assert fresh_phone.faults.counters.offline_refusals > 0


def test_restarted_device_offline_on_server_is_recovered(fresh_phone, adb_entry, make_spec, fast_retry,
                                                        adb_server):
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-restart")), retry=fast_retry) as t:
        assert t.shell(["true"]).ok
        fresh_phone.restart()
        assert t.shell(["echo", "back"]).stdout == "back\n"
    assert adb_server.state(fresh_phone.serial) == "device"


def test_device_gone_is_a_clear_retryable_error(fresh_phone, adb_entry, make_spec, retry_log):
    # A stopped device refuses connections at once (an offline_for window instead makes each
    # `adb connect` wait for the server's 10 s handshake timeout: correct, but slow for a test).
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-gone")),
                      retry=RetryPolicy(attempts=2, wait_initial=0.05), connect_wait_s=0.3) as t:
        assert t.shell(["true"]).ok
        fresh_phone.stop()
        with pytest.raises((DeviceOfflineError, ConnectionDropped), match="op13-gone") as info:
            t.shell(["true"])
    assert info.value.retryable
    assert len(retry_log()) == 1  # attempts=2: one retry, one log line


def test_unauthorized_is_clear_and_not_retried(fresh_phone, adb_entry, make_spec, fast_retry, retry_log):
    fresh_phone.faults.unauthorized(True)
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-locked")), retry=fast_retry) as t:
        with pytest.raises(DeviceUnauthorizedError, match=r"op13-locked.*RSA key prompt") as info:
            t.shell(["true"])
        assert (info.value.device, info.value.argv) == ("op13-locked", ("true",))
        assert t.health().state == "unauthorized"
    assert retry_log() == []


def test_no_space_names_device_and_path(fresh_phone, adb_entry, make_spec, fast_retry, retry_log, tmp_path):
    src = tmp_path / "weights.bin"
    src.write_bytes(os.urandom(3 * 1024 * 1024))
    fresh_phone.faults.set_free_bytes(512 * 1024)
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-full")), retry=fast_retry) as t:
        with pytest.raises(RemoteNoSpaceError) as info:
            t.push(src, f"{WORK}/model/weights.bin")
    msg = str(info.value)
    assert "op13-full" in msg and f"{WORK}/model/weights.bin" in msg and "No space left" in msg
    assert retry_log() == []


def test_server_not_running_is_a_clear_error(phone, make_spec, adb_entry):
    from virtual_lab.adb_server import free_port

    entry = adb_entry(phone, "op13-noserver")
    entry["adb_server"] = f"127.0.0.1:{free_port()}"
    with AdbTransport(make_spec(entry), retry=RetryPolicy(attempts=2, wait_initial=0.01)) as t:
        with pytest.raises(DeviceOfflineError, match=r"op13-noserver.*adb server does not answer.*start-server"):
            t.shell(["true"])


def test_cli_and_harness_see_the_same_files(adb, adb_server, phone, tmp_path):
    """What the harness pushed, the adb CLI pulls bit-identically (and vice versa)."""
    src = tmp_path / "a.bin"
    src.write_bytes(os.urandom(300_000))
    adb.push(src, f"{WORK}/cli/a.bin")
    out = tmp_path / "cli.bin"
    res = subprocess.run(adb_server.argv("-s", phone.serial, "pull", f"{WORK}/cli/a.bin", str(out)),
                         env=adb_server.env(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert _sha(out) == _sha(src)


# ---- v1 shell: late output is output, and a command is never re-sent ----------------------
def _v1(device, adb_entry, make_spec, fast_retry, name):
    return AdbTransport(make_spec(adb_entry(device, name)), retry=fast_retry, shell_v2=False)


def _runs(device, counter: str) -> int:
    path = device.host_path(counter)
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_v1_late_background_output_runs_once(fresh_phone, adb_entry, make_spec, fast_retry, retry_log):
    counter = f"{WORK}/late-runs"
    with _v1(fresh_phone, adb_entry, make_spec, fast_retry, "op13-late") as t:
        t.makedirs(WORK)
        # The child writes after the command (and so after the exit marker) has been printed.
        res = t.shell(["sh", "-c", f"echo run >> {counter}; (sleep 0.5; echo late) & echo early; exit 4"],
                      timeout=30)
    assert _runs(fresh_phone, counter) == 1
    assert (res.exit_code, res.timed_out) == (4, False)
    assert res.stdout == "early\nlate\n"
    assert retry_log() == []


def test_v1_stderr_sent_after_stdout_runs_once(fresh_phone, adb_entry, make_spec, fast_retry, retry_log):
    fresh_phone.faults.stderr_after_stdout(True)
    counter = f"{WORK}/stderr-runs"
    with _v1(fresh_phone, adb_entry, make_spec, fast_retry, "op13-lateerr") as t:
        t.makedirs(WORK)
        res = t.shell(["sh", "-c", f"echo run >> {counter}; echo out; echo err >&2; exit 2"])
    assert _runs(fresh_phone, counter) == 1
    assert res.exit_code == 2
    assert res.stdout == "out\nerr\n"  # stderr that came after the marker is still output
    assert retry_log() == []


def test_v1_link_lost_mid_command_is_not_resent(fresh_phone, adb_entry, make_spec, fast_retry, retry_log):
    from harness.errors import CommandOutcomeUnknown

    counter = f"{WORK}/cut-runs"
    with _v1(fresh_phone, adb_entry, make_spec, fast_retry, "op13-cut") as t:
        t.makedirs(WORK)
        fresh_phone.faults.drop_after_bytes(1000, scope="any")
        with pytest.raises(CommandOutcomeUnknown, match=r"op13-cut.*may have run.*not sent again") as info:
            t.shell(["sh", "-c", f"echo run >> {counter}; head -c 200000 /dev/zero; sleep 0.2"])
        assert not info.value.retryable
        # The fault names its device and the argv the driver had only as a shell string.
        assert info.value.device == "op13-cut" and info.value.argv[:2] == ("sh", "-c")
        assert fresh_phone.faults.counters.drops_fired == 1
        assert retry_log() == []  # nothing re-sent the cut command
        assert t.shell(["echo", "next"]).stdout == "next\n"  # the link itself comes back
    assert _runs(fresh_phone, counter) == 1
    # Reconnecting for the next command may meet the adb server before it lists the device
    # again (seen under load): a retry of a command that never started is allowed, only that.
    assert all(": echo (" in line for line in retry_log()), retry_log()


def test_v2_link_lost_mid_command_is_not_resent(fresh_phone, adb_entry, make_spec, fast_retry, retry_log):
    from harness.errors import CommandOutcomeUnknown

    counter = f"{WORK}/cut2-runs"
    with AdbTransport(make_spec(adb_entry(fresh_phone, "op13-cut2")), retry=fast_retry) as t:
        t.makedirs(WORK)
        fresh_phone.faults.drop_after_bytes(1000, scope="any")
        with pytest.raises(CommandOutcomeUnknown, match="op13-cut2"):
            t.shell(["sh", "-c", f"echo run >> {counter}; head -c 200000 /dev/zero; sleep 0.2"])
    assert _runs(fresh_phone, counter) == 1
    assert retry_log() == []


@pytest.mark.parametrize("bad", ["a\0b", "caf\udce9"])
def test_unsendable_argument_is_refused_before_sending(adb, bad):
    from harness.errors import UnsendableText

    with pytest.raises(UnsendableText, match="argument #2.*nothing was sent"):
        adb.shell(["echo", "ok", bad], timeout=5)
    with pytest.raises(UnsendableText, match="cwd"):
        adb.shell(["true"], cwd=f"{WORK}/{bad}")
    with pytest.raises(UnsendableText, match="environment variable X"):
        adb.shell(["true"], env={"X": bad})


def test_pull_of_a_folder_is_a_path_error_not_a_drop(adb, phone, tmp_path, retry_log):
    phone.host_path(f"{WORK}/a folder").mkdir(parents=True, exist_ok=True)
    with pytest.raises(RemotePathError, match=f"op13-virtual.*{WORK}/a folder.*Is a directory"):
        adb.pull(f"{WORK}/a folder", tmp_path / "x")
    assert retry_log() == [] and not (tmp_path / "x").exists()
