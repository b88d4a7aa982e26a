"""A health check's link state is one enum for every transport: the base's shell check, the
link fault's class, and the adb server's own states mapped onto it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConnectionDropped, DeviceUnauthorizedError, TransportError
from harness.inventory import DeviceSpec
from harness.transport import NO_RETRY, LinkState, LocalTransport, RawExec, link_state


@pytest.fixture
def spec(make_spec, tmp_path: Path) -> DeviceSpec:
    work = tmp_path / "work"
    work.mkdir()
    return make_spec({"name": "x86-host", "transport": "local", "soc": "host", "work_dir": str(work)})


class _Says(LocalTransport):
    def __init__(self, spec: DeviceSpec, answer: bytes | TransportError):
        super().__init__(spec, retry=NO_RETRY)
        self.answer = answer

    def _exec(self, command: str, timeout: float | None) -> RawExec:
        if isinstance(self.answer, TransportError):
            raise self.answer
        return RawExec(self.answer, b"", 0)


@pytest.mark.parametrize(("answer", "state"), [
    (b"nope\n", LinkState.BROKEN),
    (ConnectionDropped("x86-host: dropped"), LinkState.UNREACHABLE),
    (DeviceUnauthorizedError("x86-host: refused"), LinkState.UNAUTHORIZED),
])
def test_the_shell_check_names_the_links_state(spec: DeviceSpec, answer: bytes | TransportError,
                                               state: LinkState) -> None:
    report = _Says(spec, answer).health()
    assert report.state is state and not report.ok and report.problems


def test_a_healthy_host_is_ok(spec: DeviceSpec) -> None:
    with LocalTransport(spec) as t:
        report = t.health()
    assert report.ok and report.state is LinkState.OK


@pytest.mark.parametrize(("server", "state"), [
    ("device", LinkState.OK), ("unauthorized", LinkState.UNAUTHORIZED), ("offline", LinkState.OFFLINE),
    ("authorizing", LinkState.OFFLINE), ("connecting", LinkState.OFFLINE), ("recovery", LinkState.OFFLINE),
    ("absent", LinkState.ABSENT), ("unknown", LinkState.UNREACHABLE), ("what", LinkState.UNREACHABLE),
])
def test_the_adb_servers_states_map_onto_the_links(server: str, state: LinkState) -> None:
    assert link_state(server) is state
