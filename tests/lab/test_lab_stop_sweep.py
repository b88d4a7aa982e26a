"""A stop's sweep of the run's device processes (harness/lab/worker.py `sweep_after_stop`):
once per device, and never on a device this night was still waiting to claim, whose
processes are its holder's."""

from __future__ import annotations

import threading
import time

from labkit import ShellJob, Switch, faulty_factory

from harness.lab import DeviceLock, lock_state, run_night
from harness.lab.worker import DeviceWorker
from harness.transport import NO_RETRY, LocalTransport


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_for(cond, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_a_stop_leaves_the_processes_of_a_device_another_run_holds(lab4, make_plan):
    """dev2 is held by another run with a program running there (its pid file in the device's
    scratch folder, as any run's timed command has); this night waits for dev2's claim when
    it is stopped. The other run's program must live on."""
    inv, root = lab4
    other = DeviceLock(root / "locks", "dev2", "someone-else")
    other.acquire(0)
    theirs = root / "theirs.pid"
    holder = LocalTransport(inv.devices["dev2"], retry=NO_RETRY)
    running = threading.Thread(target=lambda: holder.shell(["sh", "-c", f"echo $$ > {theirs}; exec sleep 300"],
                                                           timeout=400), daemon=True)
    running.start()
    _wait_for(lambda: theirs.exists() and theirs.read_text().strip() != "")
    pid = int(theirs.read_text())
    stop, said = threading.Event(), []
    pids = root / "pids"
    job = ShellJob(scripts={(f"dev{i}", "cpu"): f"echo $$ >> {pids}; exec sleep 300" for i in (0, 1, 3)})

    def stop_when_waiting() -> None:
        _wait_for(lambda: any("dev2: in use by" in m for m in said)
                  and pids.exists() and len(pids.read_text().split()) >= 3)
        stop.set()

    threading.Thread(target=stop_when_waiting, daemon=True).start()
    try:
        night = run_night(make_plan(locks={"dir": "locks", "wait_s": 120}), inv, root / "out", job,
                          transport_factory=faulty_factory(Switch()), stop=stop, say=said.append, reports=False)
        assert night.interrupted and night.devices["dev2"].status == "interrupted"
        assert _alive(pid), "the stop killed a program of the run that holds dev2"
        assert all(not _alive(int(p)) for p in pids.read_text().split())  # this night's own: killed
        assert lock_state(root / "locks", "dev2").holder.run_id == "someone-else"
    finally:
        holder.kill_stray_processes()
        other.release()


def test_the_killer_and_the_worker_sweep_a_device_once(lab4, make_plan, monkeypatch):
    inv, root = lab4
    sweeps: list[str] = []
    real = DeviceWorker.kill_processes

    def counted(self: DeviceWorker) -> bool:
        sweeps.append(self.device.name)
        return real(self)

    monkeypatch.setattr(DeviceWorker, "kill_processes", counted)
    stop = threading.Event()
    pids = root / "pids"
    job = ShellJob(scripts={(f"dev{i}", "cpu"): f"echo $$ >> {pids}; exec sleep 300" for i in range(4)})
    threading.Thread(target=lambda: (_wait_for(lambda: pids.exists() and len(pids.read_text().split()) >= 4),
                                     stop.set()), daemon=True).start()
    night = run_night(make_plan(), inv, root / "out", job, transport_factory=faulty_factory(Switch()), stop=stop,
                      say=lambda m: None, reports=False)
    assert night.interrupted
    assert sorted(sweeps) == [f"dev{i}" for i in range(4)]
    assert all(not _alive(int(p)) for p in pids.read_text().split())
