import json
import signal
import threading
import xml.etree.ElementTree as ET

import pytest
from labkit import ShellJob, Switch, faulty_factory

from harness.lab import DeviceLock, lock_state, run_night
from harness.outcomes import FailureClass
from harness.report import read_records
from harness.verdict import Verdict


def _by_name(records):
    return {(r.device, r.name): r for r in records}


def test_night_fans_out_over_every_device_and_writes_reports(lab4, make_plan):
    inv, root = lab4
    plan = make_plan(repeats=2)
    job = ShellJob()
    said = []
    night = run_night(plan, inv, root / "out", job, transport_factory=faulty_factory(Switch()), say=said.append)
    assert not night.interrupted
    assert {n: o.status for n, o in night.devices.items()} == {f"dev{i}": "completed" for i in range(4)}
    recs = night.records()
    assert len(recs) == 4 * 2 * 2 and all(r.status == "passed" for r in recs)
    # Every record carries the device facts and the run; repeats are distinct tests.
    r = _by_name(recs)[("dev1", "tiny[qnn]#2")]
    assert (r.soc_model, r.htp_arch, r.suite, r.model) == ("SM8650", "v75", "matrix", "tiny")
    assert r.decode_tps == 18.0 and r.prefill_tps == 144.0 and "Paris" in r.text
    assert r.run_id == night.run_id and r.plan_entry == "matrix/tiny#2"
    # Locks are released and the holder records removed.
    assert all(not lock_state(root / "locks", f"dev{i}").held for i in range(4))
    assert not list((root / "locks").glob("*.holder.json"))
    # Reports.
    assert night.reports["junit"].is_file() and night.reports["junit:dev3"].is_file()
    assert night.reports["html"].is_file() and night.reports["history"].is_file()
    assert len(ET.parse(night.reports["junit"]).getroot().findall("testsuite")) == 4
    meta = json.loads((root / "out" / "night.json").read_text())
    assert meta["outcomes"]["dev0"]["status"] == "completed" and meta["reports"]["html"]


def test_test_failure_is_a_record_and_not_retried(lab4, make_plan):
    inv, root = lab4
    job = ShellJob(scripts={("dev2", "cpu"): "echo 'loading'; echo 'Segmentation fault' >&2; sh -c 'kill -SEGV $$'"})
    night = run_night(make_plan(), inv, root / "out", job, transport_factory=faulty_factory(Switch()),
                      say=lambda m: None, reports=False)
    crash = _by_name(night.records())[("dev2", "tiny[cpu]")]
    assert crash.status == "failed" and crash.failure_class == "crash" and crash.attempts == 1
    assert "Segmentation fault" in crash.log_excerpt
    assert [c for c in job.calls if c[0] == "dev2"] == [("dev2", "tiny[qnn]", 1), ("dev2", "tiny[cpu]", 1)]
    assert night.devices["dev2"].status == "completed"


def test_device_dropping_mid_suite_is_reconnected_and_the_test_retried_once(lab4, make_plan):
    inv, root = lab4
    switch = Switch()
    job = ShellJob(before={("dev1", "tiny[cpu]", 1): lambda: switch.unplug("dev1", calls=2)})
    night = run_night(make_plan(), inv, root / "out", job, transport_factory=faulty_factory(switch),
                      say=lambda m: None, reports=False)
    recs = _by_name(night.records())
    first, retried = recs[("dev1", "tiny[qnn]")], recs[("dev1", "tiny[cpu]")]
    assert first.attempts == 1 and not first.flaky
    assert retried.status == "passed" and retried.flaky and retried.attempts == 2
    assert "offline" in (retried.lab_run.retried_after or "")
    # The test delivered before the drop is not run again.
    assert [c for c in job.calls if c[0] == "dev1"] == [("dev1", "tiny[qnn]", 1), ("dev1", "tiny[cpu]", 1),
                                                        ("dev1", "tiny[cpu]", 2)]
    assert night.devices["dev1"].status == "completed" and night.devices["dev1"].faults == 1
    assert sum(1 for r in night.records() if r.device == "dev1") == 2


def test_device_that_keeps_failing_is_quarantined_and_the_rest_go_on(lab4, make_plan):
    inv, root = lab4
    switch = Switch()
    job = ShellJob(before={("dev3", "tiny[cpu]", 1): lambda: switch.unplug("dev3")})  # for good
    night = run_night(make_plan(repeats=2, recovery={"reconnect_s": 0.5}), inv, root / "out", job,
                      transport_factory=faulty_factory(switch),
                      say=lambda m: None)
    dev3 = night.devices["dev3"]
    assert dev3.status == "quarantined" and "did not come back" in dev3.reason
    recs = night.records()
    lost = _by_name(recs)[("dev3", "matrix/tiny#1::interrupted")]
    assert lost.status == "error" and lost.failure_class == "quarantined" and lost.signature == "lab:device-lost"
    skipped = [r for r in recs if r.device == "dev3" and r.status == "skipped"]
    assert [r.name for r in skipped] == ["matrix/tiny#2"] and "device quarantined" in skipped[0].message
    for other in ("dev0", "dev1", "dev2"):
        assert night.devices[other].status == "completed"
        assert sum(1 for r in recs if r.device == other and r.status == "passed") == 4
    assert not lock_state(root / "locks", "dev3").held


def test_unhealthy_device_is_quarantined_before_the_first_suite(lab4, make_plan):
    inv, root = lab4
    switch = Switch()
    switch.facts["dev0"] = {"battery_pct": "4"}
    night = run_night(make_plan(), inv, root / "out", ShellJob(), transport_factory=faulty_factory(switch),
                      say=lambda m: None, reports=False)
    assert night.devices["dev0"].status == "quarantined" and "battery at 4%" in night.devices["dev0"].reason
    dev0 = [r for r in night.records() if r.device == "dev0"]
    assert [(r.name, r.status) for r in dev0] == [("lab::health", "error"), ("matrix/tiny#1", "skipped")]
    assert all(night.devices[f"dev{i}"].status == "completed" for i in (1, 2, 3))


def test_busy_device_is_skipped_after_the_wait(lab4, make_plan):
    inv, root = lab4
    other = DeviceLock(root / "locks", "dev2", "someone-else")
    other.acquire(0)
    said = []
    try:
        night = run_night(make_plan(locks={"dir": "locks", "wait_s": 0.5}), inv, root / "out", ShellJob(),
                          transport_factory=faulty_factory(Switch()), say=said.append, reports=False)
    finally:
        other.release()
    assert night.devices["dev2"].status == "busy" and "someone-else" in night.devices["dev2"].reason
    assert any("dev2: in use by" in m and "waiting up to" in m for m in said)
    dev2 = [r for r in night.records() if r.device == "dev2"]
    assert dev2 and all(r.status == "skipped" and r.failure_class == "busy" for r in dev2)


def test_stop_event_ends_the_night_and_kills_device_processes(lab4, make_plan):
    inv, root = lab4
    stop = threading.Event()
    pids = root / "pids"
    job = ShellJob(scripts={(f"dev{i}", "cpu"): f"echo $$ >> {pids}; exec sleep 300" for i in range(4)})
    threading.Thread(target=lambda: (_wait_for_lines(pids, 4), stop.set()), daemon=True).start()
    night = run_night(make_plan(), inv, root / "out", job, transport_factory=faulty_factory(Switch()),
                      stop=stop, say=lambda m: None)
    assert night.interrupted
    recs = night.records()
    assert sum(1 for r in recs if r.name == "tiny[qnn]" and r.status == "passed") == 4
    cut = [r for r in recs if r.name == "tiny[cpu]"]
    assert len(cut) == 4 and all(r.failure_class == "interrupted" for r in cut)
    for pid in map(int, pids.read_text().split()):
        assert not _alive(pid)
    assert all(not lock_state(root / "locks", f"dev{i}").held for i in range(4))


def _wait_for_lines(path, n, limit=60.0):
    import time
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if path.exists() and len(path.read_text().split()) >= n:
            return
        time.sleep(0.05)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("signum,n", [(signal.SIGINT, 1), (signal.SIGINT, 4), (signal.SIGTERM, 4)],
                         ids=["ctrl-c-1-device", "ctrl-c-4-devices", "sigterm-4-devices"])
def test_interrupt_stops_cleanly_kills_device_processes_and_releases_claims(tmp_path, signum, n):
    """The child's transport kills slowly (1.5 s a process): the run must wait for its own
    kills and claim releases, then exit 2 (interrupted). With one device, the main thread is
    always joining that worker when Ctrl-C lands (on 3.11 an interrupted join() made
    is_alive() lie, and the run exited while its worker still killed)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parents[1])])}
    child = subprocess.Popen([sys.executable, str(here / "night_child.py"), str(tmp_path), str(n)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = tmp_path / "pids"
    _wait_for_lines(pids, n)
    # While the night runs, the locks name this run's process.
    assert lock_state(tmp_path / "locks", "dev0").holder.pid == child.pid
    child.send_signal(signum)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 2, err
    *_, last, at_exit = out.strip().splitlines()
    result = json.loads(last)
    # The exit's collections skip what the night left alive (process_end.py), after all of the below was written.
    assert json.loads(at_exit)["frozen_at_exit"] > 0
    assert result["interrupted"] and set(result["statuses"].values()) == {"interrupted"}
    assert "stopping: ending workers" in err and "I/O operation on closed file" not in err
    for pid in map(int, pids.read_text().split()):
        assert not _alive(pid)
    for i in range(n):
        state = lock_state(tmp_path / "locks", f"dev{i}")
        assert not state.held and state.holder is None
    recs = read_records(tmp_path / "out" / "records.jsonl")
    assert sum(1 for r in recs if r.status == "passed") == n  # the qnn test of each device
    meta = json.loads((tmp_path / "out" / "night.json").read_text())
    assert meta["interrupted"] and meta["counts"]["passed"] == n
    assert {o["status"] for o in meta["outcomes"].values()} == {"interrupted"}
    cut = [r for r in recs if r.name == "tiny[cpu]"]  # the test the stop cut short says so
    assert len(cut) == n and all(r.failure_class == "interrupted" for r in cut)
    assert sum(1 for _ in ET.parse(result["reports"]["junit"]).getroot().iter("testcase")) == len(recs)
    assert Path(result["reports"]["junit"]).is_file() and Path(result["reports"]["html"]).is_file()


def test_a_record_classed_transport_error_counts_as_a_device_fault(lab4, make_plan):
    """Runners that swallow a link fault report it as a `transport-error` record: the lab
    treats it as the device dropping (retry once, flaky), not as a test failure."""
    inv, root = lab4
    job = ShellJob(scripts={("dev0", "qnn"): "echo 'adb: device offline' >&2; exit 1"})
    real = job.__call__

    def lossy(ctx):
        for rec in real(ctx):
            if ctx.device.name == "dev0" and ctx.attempt == 1 and rec.status == "failed":
                rec.set_verdict(Verdict.failed(FailureClass.TRANSPORT_ERROR, rec.message))
                job.scripts.clear()  # the link is back for the retry
            yield rec

    night = run_night(make_plan(), inv, root / "out", lossy, transport_factory=faulty_factory(Switch()),
                      say=lambda m: None, reports=False)
    dev0 = [r for r in night.records() if r.device == "dev0"]
    assert [(r.name, r.status, r.flaky, r.attempts) for r in dev0] == [
        ("tiny[qnn]", "passed", True, 2), ("tiny[cpu]", "passed", False, 2)]
    assert night.devices["dev0"].faults == 1 and night.devices["dev0"].status == "completed"


def test_a_reused_out_folder_reports_only_this_nights_records(lab4, make_plan):
    """--out reused night after night: records.jsonl keeps every night's lines, but the counts,
    JUnit and history of a night are its own (an old failure must not fail tonight's CI)."""
    inv, root = lab4
    plan = make_plan(repeats=1)
    first = run_night(plan, inv, root / "out", ShellJob(), transport_factory=faulty_factory(Switch()), say=lambda m: None)
    second = run_night(plan, inv, root / "out", ShellJob(), transport_factory=faulty_factory(Switch()), say=lambda m: None)
    assert first.run_id != second.run_id
    assert len(read_records(root / "out" / "records.jsonl")) == 2 * len(second.records())
    assert {r.run_id for r in second.records()} == {second.run_id}
    assert second.counts.passed == len(second.records()) == len(first.records())
    suites = ET.parse(root / "out" / "junit.xml").getroot()
    assert sum(int(s.get("tests")) for s in suites.iter("testsuite")) == len(second.records())


class _CheckedJob(ShellJob):
    """A job with one failing device-less check (decided by hand: the suites' are slow to load)."""

    def export_checks(self, plan, devices, run_id):
        from pathlib import Path

        from harness.lab.export_checks import ExportCheckSet
        from harness.report import TestRecord

        checks = ExportCheckSet(run_id, plan.repeats)
        key = ("matrix:quant_metadata", Path("exports/tiny"), None)
        rec = TestRecord(name="test_quant_metadata", suite="matrix", device="", model="tiny")
        verdict = Verdict.failed(FailureClass.QUANT_METADATA, "Mul ranges inherited")
        rec.set_verdict(verdict)
        checks.decided[key] = rec, verdict, len(devices)
        for d in devices:
            checks.jobs[d.name] = [(e, key) for e in plan.entries()]
        return checks


def test_a_stop_writes_no_device_less_check_for_a_device_it_came_before(lab4, make_plan):
    inv, root = lab4
    stop = threading.Event()
    pids = root / "pids"
    job = _CheckedJob(scripts={(f"dev{i}", "cpu"): f"echo $$ >> {pids}; exec sleep 300" for i in range(4)})
    threading.Thread(target=lambda: (_wait_for_lines(pids, 1), stop.set()), daemon=True).start()
    night = run_night(make_plan(concurrency={"workers": 1}), inv, root / "out", job,
                      transport_factory=faulty_factory(Switch()), stop=stop, say=lambda m: None)
    assert night.interrupted
    checks = [r for r in night.records() if r.name == "test_quant_metadata"]
    assert [r.device for r in checks] == ["dev0"], "only the device that started its entry has a copy"
    assert checks[0].status == "failed" and "on every device it would run on (4)" in checks[0].message
    assert not any(f"dev{i}" in checks[0].message for i in range(4))
    assert {night.devices[f"dev{i}"].reason for i in (1, 2, 3)} == {"not started: the night was stopped first"}
    assert not {r.device for r in night.records()} & {"dev1", "dev2", "dev3"}
