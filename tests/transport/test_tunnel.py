"""An adb device reached only through an ssh tunnel: the real adb server listens on the
(virtual) lab host's loopback, the harness reaches it through the virtual sshd board's port
forwarding (paramiko direct-tcpip), with the board's host key checked as for ssh boards."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import DeviceOfflineError, HostKeyError, TransportError
from harness.transport import NO_RETRY, AdbOverSsh, open_transport

pytestmark = pytest.mark.slow


@pytest.fixture
def tunneled_entry(adb_entry, phone, adb_server, fresh_ssh_board):
    def entry(**ssh_overrides):
        e = adb_entry(phone, "op13-via-ssh")
        via = dict(fresh_ssh_board.inventory_entry("lab-host")["ssh"], **ssh_overrides)
        e["adb_server"] = {"host": "127.0.0.1", "port": adb_server.port, "via_ssh": via}
        return e

    return entry


def test_adb_through_the_tunnel_and_only_through_it(tunneled_entry, make_spec, adb_server, phone,
                                                    fresh_ssh_board, tmp_path: Path):
    spec = make_spec(tunneled_entry())
    assert spec.adb_server.via_ssh is not None and "via ssh" in str(spec.adb_server)
    t = open_transport(spec, retry=NO_RETRY)
    assert isinstance(t, AdbOverSsh)
    try:
        res = t.shell(["sh", "-c", "echo hello; exit 3"])
        assert (res.stdout, res.exit_code) == ("hello\n", 3)
        src = tmp_path / "blob.bin"
        src.write_bytes(bytes(range(256)) * 4096)
        t.push(src, "/data/local/tmp/harness/tunnel/blob.bin")
        back = tmp_path / "back.bin"
        t.pull("/data/local/tmp/harness/tunnel/blob.bin", back)
        assert back.read_bytes() == src.read_bytes()
        assert t.tunnel.channels_opened >= 3  # every server request went through ssh
        assert t.facts()["adb_server"].endswith(f"via ssh {fresh_ssh_board.user}@127.0.0.1:{fresh_ssh_board.port}")

        # The lab host's ssh goes away: the adb server is still up, yet the harness cannot
        # reach it - its only way there is the tunnel.
        fresh_ssh_board.stop()
        with pytest.raises(TransportError):
            t.shell(["true"])
        assert adb_server.state(phone.serial) == "device"
        # ... and it comes back with the lab host (the tunnel logs in again).
        fresh_ssh_board.start()
        assert t.shell(["echo", "back"]).stdout == "back\n"
    finally:
        t.close()
    assert not t.tunnel.running


def test_tunnel_checks_the_host_key_like_an_ssh_board(tunneled_entry, make_spec, fresh_ssh_board):
    spec = make_spec(tunneled_entry())
    fresh_ssh_board.rotate_host_key()  # the lab host now offers a key known_hosts does not have
    t = open_transport(spec, retry=NO_RETRY)
    with pytest.raises(HostKeyError, match=r"CHANGED.*") as info:
        t.shell(["true"])
    assert "op13-via-ssh" in str(info.value)
    # The host behind a tunnel is a lab host, not a board (issue 21).
    assert "the lab host offers" in str(info.value) and "lab host was re-flashed" in str(info.value)
    assert "the board" not in str(info.value)
    t.close()

    unknown = fresh_ssh_board.root / "empty_known_hosts"
    unknown.write_text("")
    spec = make_spec(tunneled_entry(known_hosts=str(unknown)))
    t = open_transport(spec, retry=NO_RETRY)
    with pytest.raises(HostKeyError, match=r"is not in .*adb_server\.via_ssh") as info:
        t.shell(["true"])
    assert "fingerprint on the lab host" in str(info.value) and "the board" not in str(info.value)
    t.close()


def test_nothing_listening_behind_the_tunnel_says_so(tunneled_entry, make_spec):
    from virtual_lab.adb_server import free_port

    entry = tunneled_entry()
    entry["adb_server"]["port"] = free_port()
    t = open_transport(make_spec(entry), retry=NO_RETRY)
    try:
        with pytest.raises(DeviceOfflineError):
            t.shell(["true"])
        assert "cannot open" in t.tunnel.last_error and "adb" in t.tunnel.last_error
    finally:
        t.close()
