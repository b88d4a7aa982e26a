"""LabgridClaim against a real labgrid-coordinator and two labgrid-exporters (two lab hosts)
publishing a virtual lab: addresses come from the places, a person's hold is waited for and
named, a killed run's places are released by the next run and nobody else's are."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import pytest
from labgrid_kit import LabgridLab, labgrid_missing, run_python

from harness.errors import HarnessError
from harness.inventory import load_inventory
from harness.lab import DeviceBusy
from harness.lab.labgrid import (
    PROCESS_COORDINATORS,
    LabgridClaim,
    LabgridError,
    identity,
    labgrid_holders,
)
from harness.transport import NO_RETRY, AdbOverSsh, open_transport

pytestmark = pytest.mark.slow

HOSTS = {"host1": ["phone1", "car1"], "host2": ["phone2", "phone3"]}


@pytest.fixture(scope="module")
def lg(tmp_path_factory):
    reason = labgrid_missing()
    if reason:
        pytest.skip(reason)
    from virtual_lab.lab import LabDeviceConfig, VirtualLab

    root = tmp_path_factory.mktemp("lgclaims")
    devices = [LabDeviceConfig("phone1", tags=("nightly",)),
               LabDeviceConfig("car1", transport="ssh", soc="SA8295", htp_arch="v68", tags=("nightly",)),
               LabDeviceConfig("phone2", soc="SM8650", htp_arch="v75", adb_server=1, tags=("nightly",)),
               LabDeviceConfig("phone3", soc="SM8550", htp_arch="v73", adb_server=1, tags=("nightly",))]
    with VirtualLab(root / "vlab", devices) as vlab, LabgridLab(root / "labgrid", vlab, HOSTS) as lab:
        # host2's phones are reached only through host2's ssh (the virtual sshd board stands in).
        lab_host_ssh = vlab.ssh_board("car1").inventory_entry("host2")["ssh"]
        lab.inventory = load_inventory(lab.devices_yaml(root / "devices.yaml", via_ssh={
            "phone2": lab_host_ssh, "phone3": lab_host_ssh}))
        yield lab


def _place(lg, name: str):
    """A place as the coordinator has it now."""
    return PROCESS_COORDINATORS.get(lg.address).place(name)


@pytest.fixture
def coordinators():
    """The process's sessions (what open_claim uses); one per coordinator per process, as
    the coordinator requires. Closed after each test, so the next one starts afresh."""
    yield PROCESS_COORDINATORS
    PROCESS_COORDINATORS.close()


def test_claim_reads_the_address_from_the_place_and_releases_it(lg, coordinators):
    said: list[str] = []
    for name in ("phone1", "car1", "phone2"):
        device = lg.inventory.get(name)
        claim = LabgridClaim(device, run_id="night-1", coordinators=coordinators)
        spec = claim.acquire(5, say=said.append)
        try:
            real = next(e for e in lg.vlab.inventory_entries() if e["name"] == name)
            if device.transport.name == "adb":
                assert f"{spec.adb_server.host}:{spec.adb_server.port}" == real["adb_server"]
            else:
                assert (spec.ssh.host, spec.ssh.port, spec.ssh.user) == (
                    real["ssh"]["host"], real["ssh"]["port"], real["ssh"]["user"])
            assert _place(lg, name).acquired == identity()
            assert _place(lg, name).harness_run == "night_1"
            t = open_transport(spec, retry=NO_RETRY)
            try:
                assert t.shell(["echo", "on", name]).stdout == f"on {name}\n"
                if name == "phone2":  # the place's loopback adb server, through host2's ssh
                    assert isinstance(t, AdbOverSsh) and t.tunnel.channels_opened > 0
            finally:
                t.close()
        finally:
            claim.release()
        assert _place(lg, name).acquired is None
        assert _place(lg, name).harness_run is None
    assert said == []


def test_a_person_holding_a_place_is_waited_for_and_named(lg, coordinators):
    lg.client("-p", "phone2", "acquire", user="alice")
    device = lg.inventory.get("phone2")
    try:
        with pytest.raises(DeviceBusy, match=r"in use by [^ ]+/alice.*skipped after waiting") as busy:
            LabgridClaim(device, run_id="night-2", coordinators=coordinators,
                         purpose="night").acquire(1, say=lambda m: None)
        assert _place(lg, "phone2").acquired.endswith("/alice")  # untouched
        # Never advice to release a place a live run holds: wait, look, release only a dead run's.
        said = str(busy.value)
        assert "Wait for that run to end" in said and "`labgrid-client -p phone2 show`" in said
        assert "release it only if that run is dead" in said and "locks.wait_s" in said
        with pytest.raises(DeviceBusy, match=r"pass a longer `--lock-timeout` to `harness push`") as busy:
            LabgridClaim(device, run_id="push-1", coordinators=coordinators, purpose="push").acquire(0.5)
        assert "locks.wait_s" not in str(busy.value)
        # DeviceClaim makes `say` optional; a labgrid claim waits without one too.
        with pytest.raises(DeviceBusy, match=r"in use by [^ ]+/alice.*skipped after waiting"):
            LabgridClaim(device, run_id="night-2", coordinators=coordinators).acquire(1)

        said: list[str] = []
        claim = LabgridClaim(device, run_id="night-3", coordinators=coordinators)
        got = {}
        waiter = threading.Thread(target=lambda: got.setdefault("spec", claim.acquire(60, say=said.append)))
        waiter.start()
        deadline = time.monotonic() + 30
        while not said and time.monotonic() < deadline:
            time.sleep(0.1)
        assert said and "alice" in said[0] and "waiting up to 60 s" in said[0]
        assert waiter.is_alive()
    finally:
        lg.client("-p", "phone2", "release", user="alice")
    waiter.join(30)
    assert "spec" in got and _place(lg, "phone2").acquired == identity()
    claim.release()
    assert _place(lg, "phone2").acquired is None


def test_a_live_run_is_never_taken_for_a_dead_one(lg, coordinators):
    first = LabgridClaim(lg.inventory.get("phone1"), run_id="live-a", coordinators=coordinators)
    first.acquire(5, say=lambda m: None)
    try:
        # A second run of the same host+user (its own process, as a second `harness lab run`).
        child = run_python(
            "from harness.inventory import load_inventory\n"
            "from harness.lab.labgrid import LabgridClaim\n"
            "from harness.lab.locks import DeviceBusy\n"
            f"inv = load_inventory({str(lg.inventory.path)!r})\n"
            "try:\n"
            "    LabgridClaim(inv.get('phone1'), run_id='live-b').acquire(1, say=print)\n"
            "except DeviceBusy as exc:\n"
            "    print('BUSY', exc)\n",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = child.communicate(timeout=60)
        assert "BUSY" in out and "harness run live_a" in out, out + err
        assert _place(lg, "phone1").harness_run == "live_a"
    finally:
        first.release()


def test_reservation_by_tags_allocates_a_matching_place(lg, coordinators, tmp_path):
    lg.client("-p", "phone2", "set-tags", "board=sm8650")
    path = tmp_path / "devices.yaml"
    text = lg.inventory.path.read_text().replace("place: phone2", "tags: {board: sm8650}")
    path.write_text(text)
    device = load_inventory(path).get("phone2")
    assert device.labgrid.place is None and device.labgrid.tags == (("board", "sm8650"),)
    claim = LabgridClaim(device, run_id="reserved", coordinators=coordinators)
    spec = claim.acquire(20, say=lambda m: None)
    try:
        assert claim.place == "phone2" and _place(lg, "phone2").acquired == identity()
        assert f"{spec.adb_server.host}:{spec.adb_server.port}" == lg.vlab.inventory_entries()[2]["adb_server"]
        assert spec.adb_server.via_ssh is not None
    finally:
        claim.release()
    assert _place(lg, "phone2").acquired is None
    assert "owner" not in lg.client("reservations").stdout  # cancelled, not left to expire


def test_clear_errors_for_a_missing_place_and_a_dead_coordinator(lg, coordinators, tmp_path):
    text = lg.inventory.path.read_text().replace("place: phone1", "place: nowhere")
    (tmp_path / "devices.yaml").write_text(text)
    device = load_inventory(tmp_path / "devices.yaml").get("phone1")
    with pytest.raises(LabgridError, match=r"no place 'nowhere'.*labgrid-client"):
        LabgridClaim(device, run_id="x", coordinators=coordinators).acquire(1, say=lambda m: None)

    from virtual_lab.adb_server import free_port

    dead = lg.inventory.path.read_text().replace(lg.address, f"127.0.0.1:{free_port()}")
    (tmp_path / "dead.yaml").write_text(dead)
    device = load_inventory(tmp_path / "dead.yaml").get("phone1")
    with pytest.raises(HarnessError, match=r"does not answer"):
        LabgridClaim(device, run_id="x", coordinators=coordinators).acquire(1, say=lambda m: None)


def test_status_names_labgrid_holders(lg, coordinators, tmp_path):
    lg.client("-p", "car1", "acquire", user="bob")
    try:
        holders = labgrid_holders(list(lg.inventory.devices.values()), coordinators)
        assert holders["car1"].endswith("held by " + _place(lg, "car1").acquired)
        assert holders["phone1"].endswith(": free")
        from harness.lab import collect_status, format_status

        statuses = {s.device.name: s for s in collect_status(lg.inventory, tmp_path / "locks", timeout_s=60)}
        table = format_status(list(statuses.values()))
        assert "/bob" in table and "labgrid place car1" in table, table
        # The health check went to the address each place publishes (nobody claimed anything).
        assert statuses["phone1"].health.ok and statuses["car1"].health.ok, table
        assert _place(lg, "phone1").acquired is None
    finally:
        lg.client("-p", "car1", "release", user="bob")


def test_a_night_over_two_lab_hosts_killed_and_run_again(lg, coordinators, tmp_path):
    """A night over both lab hosts while a person holds phone3; the harness is SIGKILLed
    mid-night (its places stay acquired, as labgrid keeps them) and run again: the new night
    releases the dead night's places, runs on them, and skips phone3 naming its holder."""
    from labkit import ShellJob, write_plan

    from harness.lab import run_night
    from harness.lab.plan import load_plan

    plan_path = write_plan(tmp_path, locks={"dir": "locks", "wait_s": 2})
    records = tmp_path / "killed" / "records.jsonl"

    def started() -> set[str]:  # devices whose first test is in (their second one now sleeps)
        from harness.report import read_records

        return {r.device for r in read_records(records)} if records.exists() else set()

    lg.client("-p", "phone3", "acquire", user="alice")
    try:
        child = run_python(
            "import sys\n"
            "from pathlib import Path\n"
            "from harness.inventory import load_inventory\n"
            "from harness.lab.plan import load_plan\n"
            "from harness.lab.scheduler import run_night\n"
            "from labkit import ShellJob\n"
            f"root = Path({str(tmp_path)!r})\n"
            "job = ShellJob(scripts={(d, 'cpu'): 'exec sleep 60' for d in ('phone1', 'car1', 'phone2')})\n"
            f"run_night(load_plan(root / 'nightly.yaml'), load_inventory({str(lg.inventory.path)!r}), "
            "root / 'killed', job, run_id='killed-night')\n",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while not {"phone1", "car1", "phone2"} <= started() and time.monotonic() < deadline:
                assert child.poll() is None, child.stderr.read()
                time.sleep(0.2)
            assert {"phone1", "car1", "phone2"} <= started()  # mid-night on both hosts
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(30)
        c = coordinators.get(lg.address)
        for name in ("phone1", "car1", "phone2"):
            p = c.place(name)
            assert p.acquired == identity() and p.harness_run == "killed_night", p
        assert c.place("phone3").acquired.endswith("/alice")

        said: list[str] = []
        night = run_night(load_plan(plan_path), lg.inventory, tmp_path / "again", ShellJob(), say=said.append,
                          run_id="next-night", reports=False)
        outcomes = {n: o.status for n, o in night.devices.items()}
        assert outcomes == {"phone1": "completed", "car1": "completed", "phone2": "completed",
                            "phone3": "busy"}, "\n".join(said)
        assert "alice" in night.devices["phone3"].reason
        released = [m for m in said if "killed_night" in m and "released" in m]
        assert {m.split()[2].rstrip(":") for m in released} == {"phone1", "car1", "phone2"}, said
        recs = night.records()
        assert {r.device for r in recs if r.status == "passed"} == {"phone1", "car1", "phone2"}
        assert {r.status for r in recs if r.device == "phone3"} == {"skipped"}
        for name in ("phone1", "car1", "phone2"):
            p = c.place(name)
            assert p.acquired is None and p.harness_run is None, p
        assert c.place("phone3").acquired.endswith("/alice")  # the person's hold, untouched
    finally:
        lg.client("-p", "phone3", "release", user="alice")
