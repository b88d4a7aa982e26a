"""Transport errors carry their data under the message a person reads: the device, the
command's argv, its exit code and the end of its stdout/stderr, filled where each fact is
known (the driver, the base's shell(), CommandResult.check); code reads the fields."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness.errors import EXCERPT_LINES, CommandFailed, ConnectionDropped, DeviceOfflineError, TransportError, excerpt
from harness.inventory import DeviceSpec
from harness.transport import NO_RETRY, AdbConnection, AdbError, AdbFault, LocalTransport, RawExec


@pytest.fixture
def spec(make_spec, tmp_path: Path) -> DeviceSpec:
    work = tmp_path / "work"
    work.mkdir()
    return make_spec({"name": "x86-host", "transport": "local", "soc": "host", "work_dir": str(work)})


def test_a_failed_command_carries_device_argv_exit_code_and_output(spec: DeviceSpec) -> None:
    script = "for i in $(seq 1 40); do echo out$i; done; echo boom >&2; exit 3"
    with LocalTransport(spec) as t, pytest.raises(CommandFailed) as info:
        t.shell(["sh", "-c", script], check=True)
    err = info.value
    assert str(err) == f"x86-host: `sh -c '{script}'` exited 3: boom"  # the message as it always was
    assert (err.device, err.argv, err.exit_code) == ("x86-host", ("sh", "-c", script), 3)
    assert err.stderr == "boom" and err.stdout.splitlines() == [f"out{i}" for i in range(21, 41)]


class _Cut(LocalTransport):
    """A driver whose link drops on every command, knowing only the shell string."""

    def _exec(self, command: str, timeout: float | None) -> RawExec:
        raise ConnectionDropped("x86-host: link dropped (test)")


def test_a_drivers_link_fault_gets_the_device_and_argv_from_shell(spec: DeviceSpec) -> None:
    with _Cut(spec, retry=NO_RETRY) as t:
        with pytest.raises(ConnectionDropped) as info:
            t.shell(["echo", "hi"], timeout=5)
        assert str(info.value) == "x86-host: link dropped (test)"
        assert (info.value.device, info.value.argv, info.value.exit_code) == ("x86-host", ("echo", "hi"), None)
        with pytest.raises(ConnectionDropped) as info:
            t.quick(["mkdir", "-p", "/x y"])
        assert info.value.argv == ("mkdir", "-p", "/x y")


def test_relayed_keeps_the_faults_data_or_names_the_device() -> None:
    fault = DeviceOfflineError("d: offline", device="d", argv=("llm_demo", "c.json"), exit_code=None, stderr="x")
    relayed = ConnectionDropped.relayed("d: link lost during t: offline", fault, device="other")
    assert isinstance(relayed, ConnectionDropped) and relayed.retryable
    assert (str(relayed), relayed.device, relayed.argv, relayed.stderr) == (
        "d: link lost during t: offline", "d", ("llm_demo", "c.json"), "x")
    bare = ConnectionDropped.relayed("d2: link lost", None, device="d2")
    assert (bare.device, bare.argv, bare.exit_code) == ("d2", (), None)


def test_excerpt_is_the_end_of_the_output() -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    assert excerpt(text).splitlines() == [f"line {i}" for i in range(100 - EXCERPT_LINES, 100)]
    assert len(excerpt("x" * 10_000)) == 4000 and excerpt("") == ""
    assert TransportError("m", stdout=text).stdout == excerpt(text)


@pytest.mark.parametrize(("reply", "fault", "refusal"), [
    (b"FAIL0006closed", AdbFault.REFUSED, "closed"),
    (b"FAIL0014device 'x' not found", AdbFault.REFUSED, "device 'x' not found"),
    (b"", AdbFault.CUT, None),  # the stream ended where OKAY/FAIL was due
    (b"WHAT", AdbFault.CUT, None),
])
def test_the_adb_servers_reply_is_classified_where_it_is_read(reply: bytes, fault: AdbFault,
                                                               refusal: str | None) -> None:
    ours, server = socket.socketpair()
    conn = AdbConnection.__new__(AdbConnection)
    conn._sock = ours
    try:
        server.sendall(reply)
        server.shutdown(socket.SHUT_WR)
        with pytest.raises(AdbError) as info:
            conn.check_okay()
        assert (info.value.fault, info.value.refusal) == (fault, refusal)
    finally:
        conn.close()
        server.close()
