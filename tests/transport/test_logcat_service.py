"""LogcatService: the device log's start/stop lifecycle on the virtual phone and on the host."""

from __future__ import annotations

import shutil
import time

import pytest

from harness.errors import HarnessError
from harness.transport import AdbTransport, LocalTransport, LogcatService


@pytest.fixture
def adb(phone, adb_entry, make_spec):
    with AdbTransport(make_spec(adb_entry(phone, "op13-logcat"))) as t:
        yield t


def test_clear_mode_slices_the_run_and_keeps_crash_reports(adb, phone):
    service = LogcatService(adb, "clear", ("MNNJNI",))
    phone.log("MNNJNI", "before the run")
    service.start()
    phone.log("MNNJNI", "during the run")
    phone.log("OtherApp", "noise")
    phone.log("DEBUG", "Fatal signal 11 (SIGSEGV)", level="F")
    text = service.stop()
    assert "during the run" in text and "Fatal signal 11" in text
    assert "before the run" not in text and "noise" not in text


def test_since_mode_keeps_the_buffer_and_takes_lines_from_start(adb, phone):
    from virtual_lab.device import LOGCAT_DEVICE_PATH

    hour_ago = time.time() - 3600
    with open(phone.host_path(LOGCAT_DEVICE_PATH), "a", encoding="utf-8") as fh:
        fh.write(f"{hour_ago:.3f} 0 MNNJNI I an hour ago\n")
    service = LogcatService(adb, "since", ("MNNJNI",))
    service.start()
    phone.log("MNNJNI", "this run")
    text = service.stop()
    assert "this run" in text and "an hour ago" not in text
    # The buffer was kept: a plain dump still has the old line.
    assert "an hour ago" in adb.shell(["logcat", "-d"], timeout=30).stdout


def test_off_no_logcat_and_bad_mode(adb, make_spec, tmp_path):
    off = LogcatService(adb, "off", ("MNNJNI",))
    off.start()
    assert off.stop() is None
    spec = make_spec({"name": "x86-host", "transport": "local", "soc": "SM8750", "htp": "emulator", "work_dir": str(tmp_path)})
    host = LogcatService(LocalTransport(spec), "clear", ("MNNJNI",))
    if shutil.which("logcat") is None:  # a host without logcat has no slice
        host.start()
        assert host.stop() is None and not host.available()
    with pytest.raises(HarnessError, match="logcat mode 'all' is not one of clear, since, off"):
        LogcatService(adb, "all")
