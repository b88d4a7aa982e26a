"""LocalTransport (the host as a device) and the shared Transport behaviour built on it."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

import pytest

from harness.errors import CommandFailed, RemotePathError, TransportError
from harness.transport import LocalTransport


@pytest.fixture
def host(make_spec, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    spec = make_spec({"name": "x86-host", "transport": "local", "soc": "SM8750", "htp": "emulator", "work_dir": str(work)})
    with LocalTransport(spec) as t:
        yield t


def test_exit_codes_and_streams(host):
    res = host.shell(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (res.exit_code, res.stdout, res.stderr, res.ok) == (3, "out\n", "err\n", False)
    assert host.shell(["sh", "-c", "kill -ABRT $$"]).signal == 6
    with pytest.raises(CommandFailed, match="x86-host.*exited 3"):
        host.shell(["sh", "-c", "echo boom >&2; exit 3"], check=True)


def test_literal_arguments(host, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("x")
    res = host.shell(["echo", f"'; rm -f {victim} #"], check=True)
    assert res.stdout.strip() == f"'; rm -f {victim} #" and victim.exists()


def test_timeout_kills_by_pid(host, tmp_path):
    marker = tmp_path / "pid"
    res = host.shell(["sh", "-c", f"echo $$ > '{marker}'; exec sleep 60"], timeout=0.5)
    assert res.timed_out
    pid = int(marker.read_text())
    assert not host.is_running(pid)
    # The pid file the base used is cleaned up.
    assert list(Path(host.device_tmp_dir()).glob("pid-*")) == []


def test_spawned_process_can_be_killed(host):
    res = host.shell(["sh", "-c", "sleep 60 > /dev/null 2>&1 & echo $!"], check=True)
    pid = int(res.stdout.strip())
    assert host.is_running(pid)
    assert host.kill(pid)
    assert not host.is_running(pid)


def test_files_and_trees(host, tmp_path):
    src = tmp_path / "src"
    (src / "sub dir").mkdir(parents=True)
    (src / "a.bin").write_bytes(os.urandom(10_000))
    (src / "sub dir" / "b;c.txt").write_text("hello")
    remote = f"{host.device.work_dir}/model"
    assert host.push_tree(src, remote) == 10_005
    assert host.list_files(remote) == ["a.bin", "sub dir/b;c.txt"]
    st = host.stat(f"{remote}/a.bin")
    assert st is not None and st.is_file and st.size == 10_000
    assert host.stat(f"{remote}/nope") is None and host.exists(remote)
    assert host.sha256(f"{remote}/a.bin") == hashlib.sha256((src / "a.bin").read_bytes()).hexdigest()
    host.rename(f"{remote}/a.bin", f"{remote}/renamed.bin")
    assert not host.exists(f"{remote}/a.bin") and host.exists(f"{remote}/renamed.bin")
    host.remove(remote, recursive=True)
    assert not host.exists(remote)
    assert host.list_files(remote) == []


def test_push_sets_mode_and_reports_progress(host, tmp_path):
    src = tmp_path / "tool"
    src.write_bytes(b"#!/bin/sh\necho ran\n")
    seen: list[int] = []
    dst = f"{host.device.work_dir}/bin/tool"
    host.push(src, dst, mode=0o755, progress=seen.append)
    assert sum(seen) == src.stat().st_size
    assert host.stat(dst).mode & 0o777 == 0o755
    assert host.shell([dst], check=True).stdout == "ran\n"


def test_push_of_a_missing_file_is_clear(host, tmp_path):
    with pytest.raises(TransportError, match="x86-host.*not a file"):
        host.push(tmp_path / "missing", f"{host.device.work_dir}/x")
    with pytest.raises(RemotePathError, match="does not exist"):
        host.pull(f"{host.device.work_dir}/missing", tmp_path / "x")


def test_free_bytes_and_health(host):
    assert host.free_bytes(f"{host.device.work_dir}/not/yet") > 0
    report = host.health()
    assert report.ok and report.state == "ok"
    facts = host.facts()
    assert facts["soc_model"] == "SM8750" and facts["transport"] == "local"


def test_device_facts_from_the_host(host):
    from harness.transport import SYSFS_BATTERY, parse_sysfs_battery

    missing = f"{host.device.work_dir}/not/yet"
    facts = LocalTransport(replace(host.device, work_dir=missing)).device_facts()
    assert facts.free_path == host.device.work_dir  # the nearest folder that exists
    assert facts.free_bytes is not None and facts.free_bytes > 0
    assert facts.boot_completed is None  # no such flag off Android: unknown, not "not booted"
    sysfs = Path(SYSFS_BATTERY)
    texts = [(sysfs / f).read_text() if (sysfs / f).is_file() else "" for f in ("capacity", "temp")]
    expected = parse_sysfs_battery(*texts)
    assert (facts.battery_pct, facts.battery_temp_c) == (expected.pct, expected.temp_c)
    report = host.health()
    assert report.device_facts.free_path == host.device.work_dir and report.device_facts.free_bytes > 0


def test_stat_under_a_file_is_absent_as_on_adb(host, tmp_path):
    # "a/b" where a is a file: adb's STA2 answers ENOTDIR (absent); so does this driver, and
    # read_and_stat with it (an export whose file became a folder asks exactly that).
    (tmp_path / "a").write_text("x")
    assert host.stat(str(tmp_path / "a" / "b")) is None
    blobs, stats = host.read_and_stat([str(tmp_path / "a" / "m")], [str(tmp_path / "a" / "b"), str(tmp_path / "a")])
    assert blobs == {str(tmp_path / "a" / "m"): None}
    assert stats[str(tmp_path / "a" / "b")] is None and stats[str(tmp_path / "a")].is_file
