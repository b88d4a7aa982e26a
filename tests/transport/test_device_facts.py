"""DeviceFacts: the probe every transport runs and its readers, and the pid-file sweep every transport shares."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness.errors import CommandFailed
from harness.transport.base import RawExec
from harness.transport.facts import (
    DeviceFacts,
    ProbeUnreadable,
    parse_df_free,
    parse_dumpsys_battery,
    parse_probe,
    parse_sysfs_battery,
)
from harness.transport.local import LocalTransport

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
    spec = make_spec({"name": "x86-host", "transport": "local", "soc": "SM8750", "work_dir": str(tmp_path / "w")})
    with LocalTransport(spec) as t:
        yield t


def test_kill_stray_processes_finds_timed_commands_of_another_transport_object(host, make_spec):
    """A timed shell() from one transport object (the hung test) is killed by another (the
    scheduler's), which knows it only from the pid file in the device's scratch folder."""
    other = LocalTransport(host.device)
    results = []
    runner = threading.Thread(target=lambda: results.append(other.shell(["sleep", "60"], timeout=120)))
    runner.start()
    scratch = Path(host.device_tmp_dir())
    deadline = time.monotonic() + 30
    while not any(p.name.startswith("pid-") and p.read_text().strip() for p in scratch.iterdir()):
        assert time.monotonic() < deadline, "the timed command never wrote its pid file"
        time.sleep(0.02)
    sleeper = int(next(p for p in scratch.iterdir() if p.name.startswith("pid-")).read_text())
    spawned = host.spawn(["sleep", "60"], stdout_path="/dev/null", stderr_path="/dev/null")

    handled = host.kill_stray_processes([spawned])

    assert handled == sorted({sleeper, spawned})
    runner.join(30)
    assert not runner.is_alive() and results[0].signal == 9
    assert not host.is_running(sleeper) and not host.is_running(spawned)
    # Only pid files speak for a later sweep (the killed command's file stays until its
    # transport's next timed command), and none of their programs runs any more.
    assert host.kill_stray_processes() == [sleeper]


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
