"""DeviceFacts: the probe every transport runs and its readers, and the pid-file sweep every transport shares."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from harness.errors import CommandFailed
from harness.transport import (
    DeviceFacts,
    LocalTransport,
    ProbeUnreadable,
    RawExec,
    parse_df_free,
    parse_dumpsys_battery,
    parse_probe,
    parse_sysfs_battery,
)

DUMPSYS = """Current Battery Service state:
  AC powered: false
  USB powered: true
  status: 2
  level: 85
  scale: 100
  temperature: 312
  technology: Li-ion
"""


def test_dumpsys_battery_level_and_tenths_of_a_degree():
    battery = parse_dumpsys_battery(DUMPSYS)
    assert (battery.pct, battery.temp_c) == (85, 31.2)
    assert not parse_dumpsys_battery("Can't find service: battery\n").known
    cold = parse_dumpsys_battery("  level: 7\n  temperature: -45\n")
    assert (cold.pct, cold.temp_c) == (7, -4.5)


def test_sysfs_battery_texts_and_absence():
    battery = parse_sysfs_battery("42\n", "398\n")
    assert (battery.pct, battery.temp_c) == (42, 39.8)
    assert parse_sysfs_battery("", "") == parse_sysfs_battery("garbage", "n/a")
    assert not parse_sysfs_battery("", "").known


def test_df_free_with_a_wrapped_device_name():
    toybox = ("Filesystem 1K-blocks Used Available Use% Mounted on\n"
              "/dev/block/dm-45 113290180 40201028 73089152 36% /data\n")
    assert parse_df_free(toybox) == 73089152 * 1024
    wrapped = ("Filesystem 1K-blocks Used Available Use% Mounted on\n"
               "/dev/mapper/a-very-long-volume-name\n   1000 400 600 40% /work\n")
    assert parse_df_free(wrapped) == 600 * 1024
    assert parse_df_free("df: /nowhere: No such file or directory\n") is None


def test_as_dict_leaves_unknown_facts_out():
    assert DeviceFacts().as_dict() == {}
    facts = DeviceFacts(boot_completed=False, free_bytes=300 << 20, free_path="/data", battery_pct=9,
                        battery_temp_c=40.0)
    assert facts.as_dict() == {"boot_completed": "0", "free_mb": "300", "free_path": "/data",
                               "battery_pct": "9", "battery_temp_c": "40.0"}


@pytest.fixture
def host(make_spec, tmp_path):
    spec = make_spec({"name": "x86-host", "transport": "local", "soc": "SM8750", "htp": "emulator", "work_dir": str(tmp_path / "w")})
    with LocalTransport(spec) as t:
        yield t


def _wait_for_pid_file(scratch: Path):
    from harness.transport import parse_stat_line

    deadline = time.monotonic() + 30
    while True:
        for p in scratch.iterdir() if scratch.is_dir() else ():
            proc = parse_stat_line(p.read_text()) if p.name.startswith("pid-") else None
            if proc is not None:
                return proc
        assert time.monotonic() < deadline, "the timed command never wrote its pid file"
        time.sleep(0.02)


def test_kill_stray_processes_finds_timed_commands_of_another_transport_object(host, make_spec):
    """A timed shell() from one transport object (the hung test) is killed by another (the
    scheduler's), which knows it only from the pid file in the device's scratch folder."""
    other = LocalTransport(host.device)
    results = []
    runner = threading.Thread(target=lambda: results.append(other.shell(["sleep", "60"], timeout=120)))
    runner.start()
    scratch = Path(host.device_tmp_dir())
    sleeper = _wait_for_pid_file(scratch).pid
    spawned = int(host.shell(["sh", "-c", "sleep 60 > /dev/null 2>&1 & echo $!"], check=True).stdout)

    handled = host.kill_stray_processes([spawned])

    assert handled == sorted({sleeper, spawned})
    runner.join(30)
    assert not runner.is_alive() and results[0].signal == 9
    assert not host.is_running(sleeper) and not host.is_running(spawned)
    # The killed command's pid file went with it: a later sweep finds nothing to kill.
    assert not [p for p in scratch.iterdir() if p.name.startswith("pid-")]
    assert host.kill_stray_processes() == []


def test_a_finished_timed_command_leaves_no_pid_file(host):
    assert host.shell(["sh", "-c", "exit 3"], timeout=30).exit_code == 3
    assert not [p for p in Path(host.device_tmp_dir()).iterdir() if p.name.startswith("pid-")]


def test_a_planted_or_stale_pid_file_kills_nothing_of_the_host(host):
    """A pid file is a claim, not a proof: a file naming an unrelated host process (a bare pid
    as older harnesses wrote, or that pid with another start time, as a stale file looks once
    the kernel has given the number to someone else) must not get it killed."""
    import subprocess

    from harness.transport import parse_stat_line

    victim = subprocess.Popen(["sleep", "300"])  # not started by the harness
    try:
        live = parse_stat_line(Path(f"/proc/{victim.pid}/stat").read_text())
        assert live is not None
        scratch = Path(host.device_tmp_dir())
        (scratch / "pid-planted-bare").write_text(f"{victim.pid}\n")
        stale = Path(f"/proc/{victim.pid}/stat").read_text().replace(f" {live.start} ", f" {live.start - 7} ", 1)
        (scratch / "pid-stale").write_text(stale)
        assert parse_stat_line(stale).start == live.start - 7
        assert host.kill_stray_processes() == []
        assert victim.poll() is None, "an unrelated host process was killed"
        assert not (scratch / "pid-stale").exists()  # read and found stale: removed
    finally:
        victim.kill()
        victim.wait()


def test_probe_output_android_board_and_broken_shell():
    android = ("ok\n@boot=1\n@dir=/data/local/tmp\n@df\nFilesystem 1K-blocks Used Available Use% Mounted on\n"
               "/dev/block/dm-45 1000 400 600 40% /data\n@dumpsys\n" + DUMPSYS + "@capacity=\n@temp=\n")
    assert parse_probe(android) == DeviceFacts(boot_completed=True, free_bytes=600 * 1024,
                                               free_path="/data/local/tmp", battery_pct=85, battery_temp_c=31.2)
    board = ("ok\n@dir=/srv\n@df\nFilesystem 1K-blocks Used Available Use% Mounted on\n"
             "/dev/sda1 1000 400 600 40% /\n@capacity=55\n@temp=402\n")
    assert parse_probe(board) == DeviceFacts(free_bytes=600 * 1024, free_path="/srv", battery_pct=55,
                                             battery_temp_c=40.2)
    # dumpsys present but silent: sysfs speaks instead, as it did before the facts moved here
    silent = board.replace("@capacity", "@dumpsys\nCan't find service: battery\n@capacity")
    assert parse_probe(silent).battery_pct == 55
    with pytest.raises(ProbeUnreadable, match="instead of the probe's `ok`"):
        parse_probe("sh: 1: Syntax error\n")
    with pytest.raises(ProbeUnreadable, match="cannot read free space from `df -k /srv`"):
        parse_probe("ok\n@dir=/srv\n@df\ndf: /srv: Permission denied\n")


def test_a_broken_shell_is_a_clear_error_not_facts(host):
    class Broken(LocalTransport):
        def _exec(self, command, timeout):
            return RawExec(b"motd: welcome!\n", b"", 0)

    with pytest.raises(CommandFailed, match="x86-host: device facts: the shell printed 'motd"):
        Broken(host.device).device_facts()


def test_a_pid_file_that_does_not_parse_is_removed_once_stale(host):
    """A pid file cut short (a full disk, a killed shell) never parses: removed once older than
    a minute, never killing anything; a fresh one is a command starting and stays."""
    scratch = Path(host.device_tmp_dir())
    stale, fresh = scratch / "pid-stale.x", scratch / "pid-fresh.x"
    stale.write_text("12")
    fresh.write_text("")
    past = time.time() - 120
    os.utime(stale, (past, past))
    assert host.kill_stray_processes() == []
    assert not stale.exists() and fresh.exists()
    fresh.unlink()
