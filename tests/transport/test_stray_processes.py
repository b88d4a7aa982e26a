"""kill_stray_processes over the three links (adb v2 and v1 to the emulated phone, ssh to the
real sshd, the host): it kills a timed command another transport object left running, and
nothing a pid file merely names. The phone's shell sees the host's processes (shared pid
namespace), so a file naming a host process is exactly the danger on the virtual lab."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness.transport import AdbTransport, LocalTransport, SshTransport, parse_stat_line

WORK = "/data/local/tmp/harness"


@pytest.fixture(params=["adb", "adb-v1", "ssh", "local"])
def link(request, make_spec, fast_retry, tmp_path):
    """(a transport opener, the device's scratch folder as a host path)."""
    kind = request.param
    if kind.startswith("adb"):
        phone, entry = request.getfixturevalue("phone"), request.getfixturevalue("adb_entry")
        spec = make_spec(entry(phone, f"op13-{kind}"))
        return (lambda: AdbTransport(spec, retry=fast_retry, shell_v2=kind == "adb")), phone.host_path(f"{WORK}/.harness")
    if kind == "ssh":
        board = request.getfixturevalue("ssh_board")
        spec = make_spec(board.inventory_entry("car-strays"))
        return (lambda: SshTransport(spec, retry=fast_retry)), Path(spec.work_dir) / ".harness"
    spec = make_spec({"name": "host", "transport": "local", "work_dir": str(tmp_path / "w")})
    return (lambda: LocalTransport(spec, retry=fast_retry)), tmp_path / "w" / ".harness"


def _pid_files(scratch: Path) -> list[Path]:
    return [p for p in scratch.iterdir() if p.name.startswith("pid-")] if scratch.is_dir() else []


def test_kills_a_left_command_and_spares_what_a_file_only_names(link):
    open_link, scratch = link
    victim = subprocess.Popen(["sleep", "300"])  # a host process the harness never started
    results: list[object] = []
    try:
        with open_link() as hung, open_link() as sweeper:
            sweeper.device_tmp_dir()
            worker = threading.Thread(target=lambda: results.append(hung.shell(["sleep", "120"], timeout=300)))
            worker.start()
            deadline = time.monotonic() + 60
            while not any(parse_stat_line(p.read_text()) for p in _pid_files(scratch)):
                assert time.monotonic() < deadline, "the timed command never wrote its pid file"
                time.sleep(0.02)
            (running,) = [parse_stat_line(p.read_text()) for p in _pid_files(scratch)]
            live = parse_stat_line(Path(f"/proc/{victim.pid}/stat").read_text())
            (scratch / "pid-planted").write_text(f"{victim.pid}\n")  # a bare pid: no proof
            stale = Path(f"/proc/{victim.pid}/stat").read_text().replace(f" {live.start} ", f" {live.start + 3} ", 1)
            (scratch / "pid-stale").write_text(stale)  # that pid, but another process's start time

            assert sweeper.kill_stray_processes() == [running.pid]

            worker.join(60)
            assert not worker.is_alive() and results and results[0].exit_code == 137, results
            assert victim.poll() is None, "a host process named only by a pid file was killed"
            assert [p.name for p in _pid_files(scratch)] == ["pid-planted"]  # unreadable: left, never trusted
            assert sweeper.kill_stray_processes() == [] and victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
        (scratch / "pid-planted").unlink(missing_ok=True)


def test_a_stop_kills_the_running_program_refuses_the_next_and_cuts_a_push(link, tmp_path):
    """The stop a caller hands the link (the lab hands the night's): the program running when it
    comes is killed on the device (its result says 128+9), no timed command starts after it, a
    push ends at its next chunk; short file commands still run."""
    from harness.errors import StopRequested

    open_link, scratch = link
    stop = threading.Event()
    results: list[object] = []
    with open_link() as t:
        t.stop_on(stop)
        worker = threading.Thread(target=lambda: results.append(t.shell(["sleep", "120"], timeout=300)))
        worker.start()
        deadline = time.monotonic() + 60
        while not any(parse_stat_line(p.read_text()) for p in _pid_files(scratch)):
            assert time.monotonic() < deadline, "the timed command never wrote its pid file"
            time.sleep(0.02)
        stop.set()
        worker.join(60)
        assert not worker.is_alive() and results[0].exit_code == 137, results
        with pytest.raises(StopRequested, match="stopped before starting `true`"):
            t.shell(["true"], timeout=30)
        assert t.quick(["true"]).ok
        big = tmp_path / "big.bin"
        big.write_bytes(os.urandom(12 << 20))
        stop.clear()
        target = f"{t.device.work_dir}/pushed.bin"
        with pytest.raises(StopRequested, match="between chunks"):
            t.push(big, target, progress=lambda n: stop.set())  # the stop comes after the first chunk
        host_copy = scratch.parent / "pushed.bin"
        assert not host_copy.exists() or host_copy.stat().st_size < big.stat().st_size
        assert _pid_files(scratch) == []
