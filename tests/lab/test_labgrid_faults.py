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
from labgrid_kit import LabgridLab, labgrid_missing
from labkit import ShellJob, write_plan

from harness.inventory import load_inventory
from harness.lab import ExitCode, for_night, run_night
from harness.lab.labgrid import PROCESS_COORDINATORS, LabgridClaim
from harness.lab.plan import load_plan

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


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stopped_night_gives_the_place_back(lg, tmp_path, signum):
    """Ctrl-C / SIGTERM mid-test in a night claimed through labgrid: exit 2, the device program
    killed, and the place released (a person's `labgrid-client acquire` works at once)."""
    import subprocess
    import time

    from labgrid_kit import run_python

    write_plan(tmp_path, locks={"dir": "locks", "wait_s": 2})
    on_device = f"/data/local/tmp/pids-{signum}"
    pids = lg.vlab.adb_device("phone1").host_path(on_device)
    pids.unlink(missing_ok=True)
    child = run_python(
        "import sys\n"
        "from pathlib import Path\n"
        "from harness.inventory import load_inventory\n"
        "from harness.lab.exitcodes import for_night\n"
        "from harness.lab.plan import load_plan\n"
        "from harness.lab.scheduler import run_night\n"
        "from harness.report.records import TestRecord\n"
        f"root = Path({str(tmp_path)!r})\n"
        "def job(ctx):  # two device programs in one test, as llm_demo's prompts of one pair\n"
        "    for _ in range(2):\n"
        f"        ctx.transport.shell(['sh', '-c', 'echo $$ >> {on_device}; exec sleep 300'], timeout=900)\n"
        "    yield TestRecord(name='two-programs', suite='s', device='phone1')\n"
        f"night = run_night(load_plan(root / 'nightly.yaml'), load_inventory({str(lg.inventory.path)!r}), "
        "root / 'out', job, reports=False)\n"
        "sys.exit(for_night(night))\n",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (pids.exists() and pids.read_text().split()):
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.05)
    assert lg.holder("phone1") is not None
    child.send_signal(signum)
    out, err = child.communicate(timeout=120)  # ended (a generous limit)
    assert child.returncode == ExitCode.INTERRUPTED, err
    assert "Traceback" not in err and "still busy" not in err, err
    assert len(pids.read_text().split()) == 1, "a device program was started after the stop"
    sleeper = int(pids.read_text().split()[0])
    assert not Path(f"/proc/{sleeper}").exists() or "Z" in Path(f"/proc/{sleeper}/stat").read_text().split(")")[-1][:3]
    assert lg.holder("phone1") is None
    lg.client("-p", "phone1", "acquire", user="carol")  # a person takes it right away
    lg.client("-p", "phone1", "release", user="carol")
