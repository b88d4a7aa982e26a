import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

from harness.lab import DeviceBusy, DeviceLock, lock_state

HOLDER = textwrap.dedent("""
    import sys, time
    from harness.lab import DeviceLock
    lock = DeviceLock(sys.argv[1], sys.argv[2], "other-run")
    lock.acquire(5)
    print("held", flush=True)
    sys.stdin.readline()   # hold until told (or killed)
    lock.release()
""")


def _holder(lock_dir, device):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_dir), device], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_process_waits_then_skips_naming_the_holder(tmp_path):
    proc = _holder(tmp_path, "dev0")
    try:
        state = lock_state(tmp_path, "dev0")
        assert state.held and state.holder.pid == proc.pid and state.holder.run_id == "other-run"
        assert state.holder.host == socket.gethostname()
        said = []
        with pytest.raises(DeviceBusy) as err:
            DeviceLock(tmp_path, "dev0", "me").acquire(0.6, say=said.append)
        assert f"pid {proc.pid} run other-run" in str(err.value) and "locks.wait_s" in str(err.value)
        assert len(said) == 1 and "waiting up to" in said[0]
        # Each front door is told its own knob: a push its --lock-timeout, never the plan's key.
        with pytest.raises(DeviceBusy) as err:
            DeviceLock(tmp_path, "dev0", "me", purpose="push").acquire(0.2)
        assert "pass a longer `--lock-timeout` to `harness push`" in str(err.value)
        assert "locks.wait_s" not in str(err.value)
        with pytest.raises(DeviceBusy, match="raise `locks.wait_s` in the plan$"):
            DeviceLock(tmp_path, "dev0", "me", purpose="night").acquire(0.2)
        # Another device in the same folder is free.
        with DeviceLock(tmp_path, "dev1", "me") as lk:
            lk.acquire(0)
            assert lock_state(tmp_path, "dev1").holder.run_id == "me"
    finally:
        proc.communicate("go\n", timeout=10)
    state = lock_state(tmp_path, "dev0")
    assert not state.held and state.holder is None
    lk = DeviceLock(tmp_path, "dev0", "me")
    lk.acquire(0)
    lk.release()


def test_waiter_gets_the_device_when_the_holder_lets_go(tmp_path):
    proc = _holder(tmp_path, "dev0")
    def let_go():
        proc.stdin.write("go\n")
        proc.stdin.flush()

    threading.Timer(0.5, let_go).start()
    lk = DeviceLock(tmp_path, "dev0", "me")
    holder = lk.acquire(20)
    assert holder.run_id == "me" and lock_state(tmp_path, "dev0").holder.run_id == "me"
    lk.release()
    proc.wait(10)


def test_killed_holder_frees_the_device_and_leaves_a_stale_record(tmp_path):
    proc = _holder(tmp_path, "dev0")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    state = lock_state(tmp_path, "dev0")
    assert not state.held and state.stale and "stale record" in state.describe()
    lk = DeviceLock(tmp_path, "dev0", "me")
    lk.acquire(0)  # the kernel dropped the dead run's flock
    assert lock_state(tmp_path, "dev0").holder.run_id == "me"
    lk.release()


def test_stop_event_cancels_the_wait(tmp_path):
    first = DeviceLock(tmp_path, "dev0", "a")
    first.acquire(0)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    with pytest.raises(DeviceBusy, match="stopped while waiting"):
        DeviceLock(tmp_path, "dev0", "b").acquire(60, cancel=stop)
    first.release()


def test_claim_dir_is_resolved_once_and_absolute(tmp_path, monkeypatch):
    from harness.inventory import Inventory
    from harness.lab import claim_dir

    inv = Inventory(path=tmp_path / "devices.yaml")
    assert claim_dir(inv, environ={}) == tmp_path.resolve() / "locks"
    assert claim_dir(inv, tmp_path / "plan-locks", environ={}) == (tmp_path / "plan-locks").resolve()
    # The env var and --lock-dir are explicit choices; a relative one is taken from the cwd, once.
    monkeypatch.chdir(tmp_path)
    env = {"HARNESS_LOCK_DIR": "env-locks"}
    assert claim_dir(inv, tmp_path / "plan-locks", environ=env) == tmp_path.resolve() / "env-locks"
    assert claim_dir(inv, tmp_path / "plan-locks", "cli-locks", environ=env) == tmp_path.resolve() / "cli-locks"
    assert claim_dir(inv, None, None, environ={"HARNESS_LOCK_DIR": ""}) == tmp_path.resolve() / "locks"


def test_devices_yaml_names_the_lab_claim_folder_and_a_plan_may_not_move_it(tmp_path):
    """Pushes and pytest sessions have no plan: devices.yaml's `locks.dir` is where every run
    on the lab meets; a plan pointing elsewhere would let a push swap a model under a night."""
    from harness.inventory import load_inventory
    from harness.lab import claim_dir
    from harness.lab.plan import PlanError

    (tmp_path / "devices.yaml").write_text(
        "locks: {dir: shared/claims}\ndevices:\n  - {name: host, transport: local, work_dir: /tmp/x}\n")
    inv = load_inventory(tmp_path / "devices.yaml")
    assert claim_dir(inv, environ={}) == (tmp_path / "shared/claims").resolve()
    assert claim_dir(inv, tmp_path / "shared/claims", environ={}) == (tmp_path / "shared/claims").resolve()
    with pytest.raises(PlanError, match="differs from .*devices.yaml's locks.dir"):
        claim_dir(inv, tmp_path / "elsewhere", environ={})
    (tmp_path / "bad.yaml").write_text("locks: /x\ndevices:\n  - {name: host, transport: local, work_dir: /tmp/x}\n")
    with pytest.raises(Exception, match="locks"):
        load_inventory(tmp_path / "bad.yaml")


def test_many_devices_states_read_only_the_files_that_are_there(tmp_path, monkeypatch):
    """`lab status` over a large lab (harness/lab/locks.py lock_states): the claim folder is
    listed once, and only a device with a file there is looked at; the answers are lock_state's."""
    import json

    import harness.lab.locks as locks
    from harness.inventory import load_inventory
    from harness.lab.claims import claim_states

    sys.path.insert(0, os.path.dirname(__file__))
    from labkit import write_inventory

    inv = load_inventory(write_inventory(tmp_path, 300))
    lock_dir = tmp_path / "locks"
    held = DeviceLock(lock_dir, "dev1", "tonight", purpose="night")
    held.acquire(0)
    earlier = DeviceLock(lock_dir, "dev2", "earlier")
    earlier.acquire(0)
    earlier.release()  # its lock file stays
    (lock_dir / "dev3.holder.json").write_text(json.dumps({"host": "h", "pid": 1, "run_id": "killed", "since": 0}))
    looked: list[str] = []
    real = locks.read_holder
    monkeypatch.setattr(locks, "read_holder", lambda path: (looked.append(path.name), real(path))[1])
    try:
        states = claim_states(list(inv.devices.values()), lock_dir=lock_dir)
    finally:
        held.release()
    assert states["dev1"].startswith("held by night host") and "run tonight" in states["dev1"]
    assert states["dev2"] == "free" and states["dev3"].startswith("free (stale record:")
    assert {states[f"dev{i}"] for i in range(4, 300)} == {"free"} and len(states) == 300
    assert sorted(set(looked)) == ["dev1.holder.json", "dev2.holder.json", "dev3.holder.json"]


def test_an_unwritable_claim_folder_is_a_usage_error_naming_it(tmp_path):
    from harness.errors import OutputPathError
    from harness.lab import ExitCode
    from harness.lab.exitcodes import for_error

    (tmp_path / "locks").write_text("a file where the claim folder should be")  # root writes anywhere else
    lock = DeviceLock(tmp_path / "locks" / "sub", "phone", "run")
    with pytest.raises(OutputPathError, match=r"claim folder .*locks/sub.*--lock-dir") as err:
        lock.acquire(0)
    assert for_error(err.value) is ExitCode.USAGE_ERROR and not lock.held
