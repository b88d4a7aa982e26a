"""SshTransport against a real OpenSSH sshd on loopback (virtual SA8295 board)."""

from __future__ import annotations

import hashlib
import os
import time
import platform
from pathlib import Path

import pytest

from harness.errors import (
    ConnectionDropped, DeviceOfflineError, DeviceUnauthorizedError, HostKeyError, RemotePathError,
)
from harness.transport.retry import RetryPolicy
from harness.transport.ssh import SshTransport


@pytest.fixture
def car(ssh_board, make_spec, fast_retry):
    with SshTransport(make_spec(ssh_board.inventory_entry("sa8295-virtual")), retry=fast_retry) as t:
        yield t


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_exec_exit_status_and_separate_streams(car):
    res = car.shell(["sh", "-c", "echo out; echo err >&2; exit 4"])
    assert (res.exit_code, res.stdout, res.stderr) == (4, "out\n", "err\n")
    assert not res.ok


def test_signal_death_reports_128_plus_n(car):
    res = car.shell(["sh", "-c", "kill -SEGV $$"])
    assert res.exit_code == 139 and res.signal == 11


def test_args_stay_literal(car, ssh_board):
    victim = ssh_board.work_dir / "victim"
    victim.write_text("keep")
    res = car.shell(["echo", f"'; rm -f {victim} #", "$HOME", "a b"], check=True)
    assert res.stdout == f"'; rm -f {victim} # $HOME a b\n"
    assert victim.read_text() == "keep"


def test_cwd_and_env(car, ssh_board):
    res = car.shell(["sh", "-c", 'pwd; echo "$GREETING"'], cwd=str(ssh_board.work_dir),
                    env={"GREETING": "hello; world"}, check=True)
    assert res.stdout.splitlines() == [str(ssh_board.work_dir), "hello; world"]


def test_sftp_put_get_roundtrip(car, ssh_board, tmp_path):
    src = tmp_path / "model part; v1.bin"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    remote = f"{ssh_board.work_dir}/new dir; x/weights 1.bin"  # parent does not exist yet
    seen: list[int] = []
    assert car.push(src, remote, mode=0o640, progress=seen.append) == src.stat().st_size
    assert sum(seen) == src.stat().st_size
    st = car.stat(remote)
    assert st is not None and st.is_file and st.size == src.stat().st_size and st.mode & 0o777 == 0o640
    back = tmp_path / "back.bin"
    assert car.pull(remote, back) == src.stat().st_size
    assert _sha(back) == _sha(src)
    assert car.sha256(remote) == _sha(src)


def test_stat_exists_rename_remove_free(car, ssh_board, tmp_path):
    base = str(ssh_board.work_dir)
    assert car.stat(f"{base}/absent") is None and not car.exists(f"{base}/absent")
    assert car.stat(base).is_dir
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("new")
    b.write_text("old")
    car.push(a, f"{base}/a.tmp")
    car.push(b, f"{base}/a")
    car.rename(f"{base}/a.tmp", f"{base}/a")  # onto an existing file: posix_rename
    assert not car.exists(f"{base}/a.tmp")
    car.pull(f"{base}/a", tmp_path / "got")
    assert (tmp_path / "got").read_text() == "new"
    car.remove(f"{base}/a")
    assert not car.exists(f"{base}/a")
    assert car.free_bytes(base) > 0


def test_pull_missing_is_a_path_error(car, ssh_board, tmp_path):
    with pytest.raises(RemotePathError, match="sa8295-virtual.*no such file"):
        car.pull(f"{ssh_board.work_dir}/nope.bin", tmp_path / "nope.bin")
    assert not (tmp_path / "nope.bin").exists()


def test_timeout_kills_the_process_by_pid(car, ssh_board):
    marker = ssh_board.work_dir / "sleeper.pid"
    res = car.shell(["sh", "-c", f"echo $$ > '{marker}'; exec sleep 60"], timeout=1.0)
    assert res.timed_out and not res.ok
    pid = int(marker.read_text())
    assert not car.is_running(pid)
    # Not killed only on our side: the host process is gone too.
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_spawn_in_background_then_kill(car, ssh_board):
    work = str(ssh_board.work_dir)
    pid = car.spawn(["sh", "-c", "echo started; echo $$ > spawned.pid; exec sleep 60"], cwd=work,
                    stdout_path=f"{work}/spawn out.txt", stderr_path=f"{work}/spawn.err")
    assert car.is_running(pid)
    pid_file = ssh_board.work_dir / "spawned.pid"
    for _ in range(500):  # the background program writes it a moment later
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.01)
    assert pid_file.read_text().strip() == str(pid)  # the program itself, not a wrapper shell
    assert car.kill(pid) and not car.is_running(pid)
    assert (ssh_board.work_dir / "spawn out.txt").read_text() == "started\n"


def test_facts_and_health(car):
    facts = car.facts()
    assert facts["soc_model"] == "SA8295" and facts["transport"] == "ssh"
    assert facts["arch"] == platform.machine()
    assert facts["model"]
    report = car.health()
    assert report.ok, report.problems
    assert int(report.facts["work_dir_free_bytes"]) > 0


def test_changed_host_key_is_refused(fresh_ssh_board, make_spec):
    spec = make_spec(fresh_ssh_board.inventory_entry("car-mitm"))
    fresh_ssh_board.rotate_host_key()  # known_hosts keeps the old key
    with SshTransport(spec, retry=RetryPolicy(attempts=3, wait_initial=0.01)) as t:
        with pytest.raises(HostKeyError) as info:
            t.shell(["true"])
    msg = str(info.value)
    assert "car-mitm" in msg and f"127.0.0.1:{fresh_ssh_board.port}" in msg and "ssh-keygen -R" in msg


def test_unknown_host_key_refused_unless_trusted(fresh_ssh_board, make_spec, retry_log):
    fresh_ssh_board.known_hosts_path.write_text("")
    entry = fresh_ssh_board.inventory_entry("car-new")
    with SshTransport(make_spec(entry)) as t:
        with pytest.raises(HostKeyError, match=r"car-new.*not in .*known_hosts.*trust_new_host_key"):
            t.shell(["true"])
    assert retry_log() == []  # not retryable
    assert fresh_ssh_board.known_hosts_path.read_text() == ""

    trusting = make_spec(fresh_ssh_board.inventory_entry("car-new", trust_new_host_key=True))
    with SshTransport(trusting) as t:
        assert t.shell(["echo", "hi"]).stdout == "hi\n"
    assert fresh_ssh_board.host_public_key() in fresh_ssh_board.known_hosts_path.read_text()
    with SshTransport(make_spec(entry)) as t:  # now known: the strict default connects
        assert t.shell(["true"]).ok


def test_missing_known_hosts_file_is_refused(fresh_ssh_board, make_spec):
    fresh_ssh_board.known_hosts_path.unlink()
    with SshTransport(make_spec(fresh_ssh_board.inventory_entry("car-nofile"))) as t:
        with pytest.raises(HostKeyError, match="does not exist"):
            t.exists("/")
    # Opting in creates the file with the board's key.
    entry = fresh_ssh_board.inventory_entry("car-nofile", trust_new_host_key=True)
    with SshTransport(make_spec(entry)) as t:
        assert t.exists("/")
    assert fresh_ssh_board.host_public_key() in fresh_ssh_board.known_hosts_path.read_text()


def test_refused_login_is_unauthorized_and_not_retried(fresh_ssh_board, make_spec, retry_log):
    fresh_ssh_board.refuse_auth()
    with SshTransport(make_spec(fresh_ssh_board.inventory_entry("car-locked"))) as t:
        with pytest.raises(DeviceUnauthorizedError, match=r"car-locked.*refused.*authorized_keys"):
            t.shell(["true"])
    assert retry_log() == []


def test_offline_board_then_back(fresh_ssh_board, make_spec, fast_retry, retry_log):
    spec = make_spec(fresh_ssh_board.inventory_entry("car-flaky"))
    with SshTransport(spec, retry=RetryPolicy(attempts=2, wait_initial=0.01)) as t:
        assert t.shell(["true"]).ok
        fresh_ssh_board.stop()
        with pytest.raises((DeviceOfflineError, ConnectionDropped), match="car-flaky"):
            t.shell(["true"])
        assert len(retry_log()) == 1  # one log line per retry
        fresh_ssh_board.start()
        assert t.shell(["echo", "back"]).stdout == "back\n"  # reconnects lazily


def test_idle_connection_cut_reconnects(fresh_ssh_board, make_spec, fast_retry):
    spec = make_spec(fresh_ssh_board.inventory_entry("car-reboot"))
    with SshTransport(spec, retry=fast_retry) as t:
        assert t.shell(["true"]).ok
        fresh_ssh_board.stop()   # cuts the open connection
        fresh_ssh_board.start()  # back on the same port
        assert t.shell(["echo", "again"]).stdout == "again\n"


def test_drop_mid_push_is_retried_with_a_log_line(fresh_ssh_board, make_spec, fast_retry, retry_log, tmp_path):
    spec = make_spec(fresh_ssh_board.inventory_entry("car-cut"))
    src = tmp_path / "blob"
    src.write_bytes(os.urandom(6 * 1024 * 1024))
    cuts: list[int] = []

    def cut_once(n: int) -> None:
        if not cuts:  # the board reboots after the first MiB went out
            cuts.append(n)
            fresh_ssh_board.stop()
            fresh_ssh_board.start()

    with SshTransport(spec, retry=fast_retry) as t:
        remote = f"{fresh_ssh_board.work_dir}/blob"
        assert t.push(src, remote, progress=cut_once) == src.stat().st_size
        assert t.sha256(remote) == _sha(src)
    lines = retry_log()
    assert len(lines) == 1 and "push blob" in lines[0] and "car-cut" in lines[0]
