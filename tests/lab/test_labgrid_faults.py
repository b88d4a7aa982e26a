"""Faults at labgrid's edge are the lab's, not harness bugs: a reservation no place can meet,
a coordinator that is down, killed or restarted during a night. Against the real
labgrid-coordinator and exporter (labgrid_kit): each gives a clear message naming the device,
the device is reported as not claimed (busy), never "quarantined (internal error)", the exit
code is the README's (1 when a device could not be had, never 3), and releasing a claim
whose coordinator is gone does not raise."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from harness.inventory import load_inventory
from harness.lab.exitcodes import ExitCode, for_night
from harness.lab.labgrid import PROCESS_COORDINATORS, LabgridClaim
from harness.lab.plan import load_plan
from harness.lab.scheduler import run_night
from labgrid_kit import LabgridLab, labgrid_missing
from labkit import ShellJob, write_plan

pytestmark = pytest.mark.slow

HOSTS = {"host1": ["phone1"]}


@pytest.fixture(scope="module")
def vlab(tmp_path_factory):
    reason = labgrid_missing()
    if reason:
        pytest.skip(reason)
    from virtual_lab.lab import LabDeviceConfig, VirtualLab

    with VirtualLab(tmp_path_factory.mktemp("lgfaults") / "vlab", [LabDeviceConfig("phone1", tags=("nightly",))]) as v:
        yield v


@pytest.fixture
def lg(vlab, tmp_path):
    """A coordinator of this test's own (the tests kill it)."""
    with LabgridLab(tmp_path / "labgrid", vlab, HOSTS) as lab:
        lab.inventory = load_inventory(lab.devices_yaml(tmp_path / "devices.yaml"))
        yield lab
    PROCESS_COORDINATORS.close()


def _night(inventory_path: Path, root: Path, job=None):
    said: list[str] = []
    plan = load_plan(write_plan(root, locks={"dir": "locks", "wait_s": 2}))
    night = run_night(plan, load_inventory(inventory_path), root / "out", job or ShellJob(), say=said.append,
                      reports=False)
    return night, "\n".join(said)


def _not_a_bug(night, said: str) -> None:
    assert night.counts.internal_errors == 0, said
    assert "internal error" not in said and "internal error" not in night.devices["phone1"].reason, said
    assert not [r for r in night.records() if r.failure_class == "internal-error"]


def test_a_reservation_no_place_can_meet_is_a_clear_busy_device(lg, tmp_path):
    path = tmp_path / "reserve.yaml"
    path.write_text(lg.inventory.path.read_text().replace("place: phone1", "tags: {board: nosuchboard}"))
    night, said = _night(path, tmp_path)
    _not_a_bug(night, said)
    outcome = night.devices["phone1"]
    assert outcome.status == "busy", outcome
    assert "phone1" in outcome.reason and "no place carries the tags board=nosuchboard" in outcome.reason
    assert for_night(night) == ExitCode.TESTS_FAILED
    assert "owner" not in lg.client("reservations").stdout  # the reservation was cancelled


def test_a_coordinator_that_is_down_is_a_clear_busy_device(lg, tmp_path):
    lg.stop()
    night, said = _night(lg.inventory.path, tmp_path)
    _not_a_bug(night, said)
    outcome = night.devices["phone1"]
    assert outcome.status == "busy" and f"labgrid coordinator {lg.address} does not answer" in outcome.reason
    assert for_night(night) == ExitCode.TESTS_FAILED


def _kill_coordinator(lg: LabgridLab) -> None:
    coordinator = lg._procs[0]
    os.killpg(coordinator.pid, signal.SIGKILL)
    coordinator.wait(10)
    lg._procs.remove(coordinator)


@pytest.mark.parametrize("restart", [False, True], ids=["killed", "restarted"])
def test_a_coordinator_lost_mid_night_does_not_fail_the_night(lg, tmp_path, restart):
    """The coordinator dies (and comes back) while the device runs its tests: the tests go on,
    the release at the end does not raise, the night is what its tests say."""

    def lose_it() -> None:
        _kill_coordinator(lg)
        if restart:
            lg._spawn(["labgrid-coordinator", "-l", lg.address], "coordinator-again.log")
            lg._wait_port()

    job = ShellJob(before={("phone1", "tiny[cpu]", 1): lose_it})
    night, said = _night(lg.inventory.path, tmp_path, job)
    _not_a_bug(night, said)
    assert night.devices["phone1"].status == "completed", said
    assert night.counts.passed == 2 and for_night(night) == ExitCode.OK, said


def test_release_after_the_coordinator_died_does_not_raise(lg, caplog):
    claim = LabgridClaim(lg.inventory.get("phone1"), run_id="orphaned", coordinators=PROCESS_COORDINATORS)
    claim.acquire(10, say=lambda m: None)
    _kill_coordinator(lg)
    claim.release()  # warns, never raises
    claim.release()  # and stays idempotent
    assert any("could not release labgrid place phone1" in r.getMessage() for r in caplog.records)
