"""SshTransport against a real OpenSSH sshd on loopback (virtual SA8295 board)."""

from __future__ import annotations

import hashlib
import os
import platform
import time
from pathlib import Path

import pytest

from harness.errors import (
    ConnectionDropped,
    DeviceOfflineError,
    DeviceUnauthorizedError,
    HostKeyError,
    RemotePathError,
)
from harness.transport import RetryPolicy, SshTransport


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


def test_facts_and_health(car):
    facts = car.facts()
    assert facts["soc_model"] == "SA8295" and facts["transport"] == "ssh"
    assert facts["arch"] == platform.machine()
    assert facts["model"]
    report = car.health()
    assert report.ok, report.problems
    assert report.device_facts.free_bytes > 0


def test_device_facts_from_the_board(ssh_board, make_spec):
    """sysfs and df over ssh; a board has no boot flag (unknown, not "not booted"), and a work
    folder not yet made is measured in its nearest existing folder (it was "absent" before)."""
    from harness.transport import SYSFS_BATTERY, parse_sysfs_battery

    entry = ssh_board.inventory_entry("car-facts")
    entry["work_dir"] = f"{ssh_board.work_dir}/not/yet"
    with SshTransport(make_spec(entry)) as t:
        facts = t.device_facts()
    assert facts.boot_completed is None
    assert facts.free_path == str(ssh_board.work_dir) and facts.free_bytes > 0
    sysfs = Path(SYSFS_BATTERY)  # the board is this machine behind sshd
    texts = [(sysfs / f).read_text() if (sysfs / f).is_file() else "" for f in ("capacity", "temp")]
    expected = parse_sysfs_battery(*texts)
    assert (facts.battery_pct, facts.battery_temp_c) == (expected.pct, expected.temp_c)


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


# ---- login cut by the link, known_hosts read like OpenSSH -----------------------------------
class _CutLoginProxy:
    """TCP proxy in front of the board that, for the first `cuts` connections, lets the key
    exchange and the service request through and then closes both sides instead of forwarding
    the client's next packet: the USERAUTH_REQUEST. Cleartext packets are parsed up to the
    client's NEWKEYS (msg 21); after it every client write is one encrypted packet (paramiko
    waits for SERVICE_ACCEPT before sending its login request)."""

    def __init__(self, target_port: int, cuts: int = 1):
        import socket
        import threading

        self.target_port, self.cuts_left, self.cut = target_port, cuts, 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            cut = self.cuts_left > 0
            self.cuts_left -= 1
            threading.Thread(target=self._pipe, args=(upstream, client, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(client, upstream, cut), daemon=True).start()

    def _pipe(self, src, dst, cut: bool | None) -> None:
        import socket

        buf, newkeys_seen, encrypted_writes = b"", False, 0
        try:
            while data := src.recv(65536):
                if cut:
                    if newkeys_seen:
                        encrypted_writes += 1
                    else:
                        buf += data
                        newkeys_seen, rest = self._after_newkeys(buf)
                        encrypted_writes += 1 if newkeys_seen and rest else 0
                    if encrypted_writes >= 2:  # the login request: cut the link here
                        self.cut += 1
                        break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    @staticmethod
    def _after_newkeys(buf: bytes) -> tuple[bool, bytes]:
        """(client NEWKEYS seen, bytes after it) in the cleartext part of the client stream."""
        at = buf.find(b"\r\n")  # the version banner line
        if at < 0:
            return False, b""
        pos = at + 2
        while pos + 6 <= len(buf):
            length = int.from_bytes(buf[pos:pos + 4], "big")
            if buf[pos + 5] == 21:
                return True, buf[pos + 4 + length:]
            pos += 4 + length
        return False, b""

    def close(self) -> None:
        self.server.close()


def _via_proxy(board, proxy, name: str) -> dict:
    known = board.root / f"known_hosts-{name}"
    known.write_text(f"[127.0.0.1]:{proxy.port} {board.host_public_key()}\n")
    return board.inventory_entry(name, port=proxy.port, known_hosts=str(known))


def test_link_cut_during_login_is_a_dropped_connection_and_retried(fresh_ssh_board, make_spec, fast_retry,
                                                                   retry_log):
    proxy = _CutLoginProxy(fresh_ssh_board.port, cuts=1)
    try:
        with SshTransport(make_spec(_via_proxy(fresh_ssh_board, proxy, "car-cutlogin")), retry=fast_retry) as t:
            assert t.shell(["echo", "in"]).stdout == "in\n"
    finally:
        proxy.close()
    assert proxy.cut == 1
    lines = retry_log()
    assert len(lines) == 1 and "car-cutlogin" in lines[0] and "dropped during login" in lines[0]


def test_link_cut_during_login_without_retries_is_not_unauthorized(fresh_ssh_board, make_spec):
    proxy = _CutLoginProxy(fresh_ssh_board.port, cuts=1)
    try:
        with SshTransport(make_spec(_via_proxy(fresh_ssh_board, proxy, "car-cut1")),
                          retry=RetryPolicy(attempts=1)) as t:
            with pytest.raises(ConnectionDropped, match="car-cut1.*dropped during login") as info:
                t.shell(["true"])
    finally:
        proxy.close()
    assert info.value.retryable and proxy.cut == 1


def test_malformed_known_hosts_lines_are_skipped_with_a_warning(fresh_ssh_board, make_spec, caplog):
    import logging

    good = fresh_ssh_board.known_hosts_line()
    kind, blob = fresh_ssh_board.host_public_key().split()
    path = fresh_ssh_board.known_hosts_path
    path.write_text(
        "# comment\n"
        f"other-host.example {kind} {blob[:17]}\n"          # truncated key: bad base64 length
        f"third.example {kind} {blob[:-12]}\n"                # cut inside the key data
        "lonely-field\n"
        f"@cert-authority *.example {kind} {blob}\n"
        + good.replace(" ", "   ", 1))                        # blanks as OpenSSH allows them
    caplog.set_level(logging.WARNING, logger="harness.transport")
    with SshTransport(make_spec(fresh_ssh_board.inventory_entry("car-kh"))) as t:
        assert t.shell(["echo", "ok"]).stdout == "ok\n"
    warned = [r.getMessage() for r in caplog.records if "known_hosts" in r.getMessage() or "@cert" in r.getMessage()]
    for lineno in (2, 3, 4, 5):
        assert any(f"{path}:{lineno}:" in m for m in warned), (lineno, warned)


def test_revoked_host_key_is_refused(fresh_ssh_board, make_spec):
    path = fresh_ssh_board.known_hosts_path
    path.write_text(fresh_ssh_board.known_hosts_line() + f"@revoked * {fresh_ssh_board.host_public_key()}\n")
    with SshTransport(make_spec(fresh_ssh_board.inventory_entry("car-revoked"))) as t:
        with pytest.raises(HostKeyError, match="car-revoked.*@revoked"):
            t.shell(["true"])


def test_unsendable_argument_is_refused_before_sending(car):
    from harness.errors import UnsendableText

    with pytest.raises(UnsendableText, match="NUL"):
        car.shell(["echo", "a\0b"], timeout=5)


def test_link_lost_mid_command_is_not_resent(fresh_ssh_board, make_spec, fast_retry, retry_log):
    import threading

    from harness.errors import CommandOutcomeUnknown

    counter = fresh_ssh_board.work_dir / "runs"
    outcome: list[BaseException | object] = []
    with SshTransport(make_spec(fresh_ssh_board.inventory_entry("car-midcmd")), retry=fast_retry) as t:
        def run() -> None:
            try:
                outcome.append(t.shell(["sh", "-c", f"echo run >> '{counter}'; sleep 5"], timeout=30))
            except BaseException as exc:  # the assertion below looks at it
                outcome.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 15
        while not counter.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        fresh_ssh_board.stop()  # the board reboots while the command runs
        fresh_ssh_board.start()
        worker.join(30)
        assert len(outcome) == 1 and isinstance(outcome[0], CommandOutcomeUnknown), outcome
        assert "car-midcmd" in str(outcome[0]) and not outcome[0].retryable
        assert t.shell(["echo", "next"]).stdout == "next\n"
    assert counter.read_text().splitlines() == ["run"]
    assert retry_log() == []


def _pids_whose_cmdline_holds(*needles: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if all(n in cmdline for n in needles):
                found.append(int(entry.name))
    return found


def test_a_channel_closed_without_an_exit_status_is_an_unknown_outcome(fresh_ssh_board, make_spec, fast_retry,
                                                                       retry_log):
    """paramiko calls a closed channel's exit status ready (-1) whether or not the board sent one.
    The real sshd closes the channel with no exit-status when the board's shell is killed (an
    exit-signal, which paramiko drops), as it looks when the link dies mid-command: the command
    may have run, so it is CommandOutcomeUnknown, never "exited -1"."""
    import signal
    import threading

    from harness.errors import CommandOutcomeUnknown
    from virtual_lab.sshd import _descendants

    token = f"marker-{os.getpid()}-{time.monotonic_ns()}"
    started = fresh_ssh_board.work_dir / "started"
    outcome: list[BaseException | object] = []
    with SshTransport(make_spec(fresh_ssh_board.inventory_entry("car-noexit")), retry=fast_retry) as t:
        def run() -> None:
            try:
                outcome.append(t.shell(["sh", "-c", f": {token}; touch '{started}'; sleep 20"], timeout=60))
            except BaseException as exc:  # the assertion below looks at it
                outcome.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 15
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        # The board-side shell sshd started (its command line ends with our `exit $?`), then the rest.
        shells = _pids_whose_cmdline_holds(token, "exit $?")
        assert shells, "the board's login shell was not found"
        rest = [p for shell in shells for p in _descendants(shell)]  # only what that shell started
        for pid in shells + rest:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        worker.join(30)
        assert len(outcome) == 1 and isinstance(outcome[0], CommandOutcomeUnknown), outcome
        assert "car-noexit" in str(outcome[0]) and "without an exit status" in str(outcome[0])
        assert t.shell(["echo", "next"]).stdout == "next\n"
    assert retry_log() == []


_NO_BANNER_CHILD = """
import logging, socket, sys, threading
from pathlib import Path
import yaml
from harness.inventory import load_inventory
from harness.transport import RetryPolicy
from harness.transport import SshTransport

server = socket.create_server(("127.0.0.1", 0))   # accepts TCP, never says a word
held = []
threading.Thread(target=lambda: [held.append(server.accept()) for _ in iter(int, 1)], daemon=True).start()
root = Path(sys.argv[1])
if sys.argv[2] == "root-configured":
    logging.basicConfig()  # as labgrid's client does on its first logging.error
(root / "known_hosts").write_text("")
(root / "devices.yaml").write_text(yaml.safe_dump({"devices": [{
    "name": "car-mute", "transport": "ssh", "soc": "SA8295", "work_dir": "/tmp/car-mute",
    "ssh": {"host": "127.0.0.1", "port": server.getsockname()[1], "user": "harness",
            "known_hosts": str(root / "known_hosts")}}]}))
device = load_inventory(root / "devices.yaml").get("car-mute")
with SshTransport(device, retry=RetryPolicy(attempts=3, wait_initial=0.01), connect_timeout=1.0) as t:
    try:
        t.shell(["true"])
    except Exception as exc:
        print(f"harness: {exc}", file=sys.stderr)
"""


@pytest.mark.parametrize("logging_setup", ["unconfigured", "root-configured"])
def test_a_host_that_never_sends_a_banner_prints_no_paramiko_traceback(tmp_path, logging_setup):
    """paramiko's transport thread logs a traceback at ERROR (to Python's last-resort handler
    when nothing configured logging, as in the `harness` command) for a host that accepts TCP
    but sends no ssh banner. Only the harness's own lines reach the terminal, also when a root
    handler exists (labgrid's client installs one). A child process: pytest's log capture would
    hide the last-resort output."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    run = subprocess.run([sys.executable, "-c", _NO_BANNER_CHILD, str(tmp_path), logging_setup], env=env,
                         capture_output=True, text=True, timeout=120)
    lines = run.stderr.strip().splitlines()
    assert "Traceback" not in run.stderr and "paramiko" not in run.stderr, run.stderr
    # The last line names what happened: the port answered, no SSH session came up (issue 36).
    assert lines and lines[-1].startswith("harness: car-mute: ssh 127.0.0.1:"), run.stderr
    assert "no SSH session came up" in lines[-1], run.stderr
    assert all("car-mute" in ln for ln in lines), run.stderr  # retry notes and the last line, nothing else


@pytest.mark.parametrize("banner", [b"", b"SSH-2.0-stalled\r\n"])
def test_a_port_that_answers_without_an_ssh_session_is_named_so(tmp_path, banner):
    """A TCP port that accepts but never says SSH (or stalls after its banner): the error says
    no SSH session came up, never paramiko's "No existing session" (issue 36)."""
    import socket
    import threading

    from harness.errors import DeviceOfflineError
    from harness.inventory import SshSpec
    from harness.transport.ssh import connect_client

    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        conn, _ = server.accept()
        held.append(conn)
        conn.sendall(banner)

    threading.Thread(target=accept, daemon=True).start()
    spec = SshSpec(host="127.0.0.1", port=server.getsockname()[1], trust_new_host_key=True,
                   known_hosts=tmp_path / "known_hosts")
    try:
        with pytest.raises(DeviceOfflineError) as err:
            connect_client(spec, name="board", inventory="devices.yaml", timeout=1.0)
    finally:
        server.close()
        for conn in held:
            conn.close()
    assert "no SSH session came up within 1 s" in str(err.value) and "No existing session" not in str(err.value)
