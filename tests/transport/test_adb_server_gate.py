"""Issue 44: a burst of failing `adb connect`s killed Debian's adb server
(fdevent_epoll.cpp:88); connects to one server now take one of a few slots, and a local
server that died is started again once, said on the log."""

from __future__ import annotations

import logging
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import DeviceOfflineError, TransportError
from harness.transport import AdbTransport, RetryPolicy
from harness.transport.adb.gate import CONNECT_SLOTS


@pytest.fixture(autouse=True)
def private_gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the slots' lock files


class FakeServer:
    """An adb server's host protocol, enough for a TCP device that never comes up: its state
    is `not found`, and each `host:connect` answers "failed to connect" after `hold_s`."""

    def __init__(self, counter: dict[str, int], hold_s: float = 0.25) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.hold_s, self.counter = hold_s, counter
        self.lock = threading.Lock()
        self.now = self.peak = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    @staticmethod
    def _block(text: str) -> bytes:
        return b"%04x" % len(text) + text.encode()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            n = int(conn.recv(4), 16)
            cmd = conn.recv(n).decode()
            if cmd.startswith("host:connect:"):
                with self.lock:
                    self.now += 1
                    self.counter["now"] += 1
                    self.peak = max(self.peak, self.now)
                    self.counter["peak"] = max(self.counter["peak"], self.counter["now"])
                time.sleep(self.hold_s)
                with self.lock:
                    self.now -= 1
                    self.counter["now"] -= 1
                conn.sendall(b"OKAY" + self._block(f"failed to connect to {cmd[13:]}"))
            else:
                conn.sendall(b"FAIL" + self._block("device not found"))

    def close(self) -> None:
        self.sock.close()


def _spec(make_spec, port: int, i: int):
    return make_spec({"name": f"d{i}", "transport": "adb", "serial": f"127.0.0.1:{40000 + i}",
                      "adb_server": f"127.0.0.1:{port}", "soc": "SM8750", "work_dir": "/data/local/tmp/h"})


def test_connects_to_one_server_are_bounded_per_server(make_spec):
    counter = {"now": 0, "peak": 0}
    servers = [FakeServer(counter), FakeServer(counter)]
    errors: list[BaseException] = []

    def connect(spec) -> None:
        t = AdbTransport(spec, retry=RetryPolicy(attempts=1), connect_wait_s=0.1)
        try:
            t._ensure_ready()
        except TransportError as exc:
            errors.append(exc)

    specs = [_spec(make_spec, s.port, i + 100 * k) for k, s in enumerate(servers) for i in range(12)]
    threads = [threading.Thread(target=connect, args=(s,)) for s in specs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for s in servers:
        s.close()
    assert len(errors) == len(specs) and all("failed to connect" in str(e) for e in errors)
    assert [s.peak for s in servers] == [CONNECT_SLOTS, CONNECT_SLOTS]  # was 12: all at once
    assert counter["peak"] > CONNECT_SLOTS  # a limit per server, not one for the host


@pytest.fixture
def own_server(adb_server, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """An adb server of this test's own (it is stopped under the test), HOME its private one so
    that the restart keeps its keys there, never in the user's ~/.android."""
    from virtual_lab.adb_server import AdbServer as VirtualAdbServer

    server = VirtualAdbServer().start()
    monkeypatch.setenv("HOME", str(server.home))
    yield server
    server.started = True  # the harness's restart: stop it as well
    server.stop()


def test_a_server_that_died_is_started_again_once_and_said(own_server, fresh_phone, make_spec, caplog):
    caplog.set_level(logging.WARNING, logger="harness.transport")
    spec = make_spec({"name": "op13", "transport": "adb", "serial": fresh_phone.serial,
                      "adb_server": f"127.0.0.1:{own_server.port}", "soc": "SM8750",
                      "work_dir": "/data/local/tmp/h"})
    with AdbTransport(spec, retry=RetryPolicy(attempts=3, max_seconds=30, wait_initial=0.05, wait_max=0.2)) as t:
        assert t.shell(["echo", "one"]).stdout == "one\n"
        own_server.run("kill-server", timeout=15)  # as adb's abort leaves it: nothing on the port
        assert t.shell(["echo", "two"]).stdout == "two\n"
        said = [r.getMessage() for r in caplog.records]
        assert sum("had stopped (its port refused connections" in m and "started it again" in m for m in said) == 1, said
        assert own_server.state(fresh_phone.serial) == "device"
        own_server.run("kill-server", timeout=15)
        with pytest.raises(DeviceOfflineError, match="again after the harness restarted it once"):
            t.shell(["echo", "three"])
