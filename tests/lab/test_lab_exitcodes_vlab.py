"""The exit-code table (harness/lab/exitcodes.py), each code reached by a real night on the
virtual lab through the console script, and the device claims that hold across runs: two
nights from two folders never drive a device at once, `harness push` waits for a night, a
pytest `--device` session gives up naming the holder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.lab import DeviceLock, ExitCode, lock_state
from harness.report import read_records

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DEVICE = "oneplus13"


class Lab:
    """One virtual device, its runtime and exports (fast, slow, crashing), and a way to run
    `harness` against it as a user does."""

    def __init__(self, root: Path):
        from virtual_lab.exports import default_behaviour, make_qwen3_export
        from virtual_lab.lab import VirtualLab, default_devices

        self.root = root
        self.vlab = VirtualLab(root / "lab", [default_devices()[0]]).start()
        self.runtime = self.vlab.runtime_dir("v79")
        self.exports: dict[str, Path] = {}
        # A runtime whose llm_demo sleeps 1.5 s first, for nights that must hold the device while
        # something else tries to use it (four runs: 6 s held, several times what a second harness
        # process needs to start and meet the claim). Same files as the fast one (both are pushed to the
        # device's one llm_demo-v79 runtime folder): only llm_demo's text differs.
        self.slow_runtime = root / "slow-runtime"
        shutil.copytree(self.runtime, self.slow_runtime)
        launcher = (self.slow_runtime / "llm_demo").read_text().splitlines(keepends=True)
        (self.slow_runtime / "llm_demo").write_text(launcher[0] + "import time; time.sleep(1.5)\n" + "".join(launcher[1:]))
        # decode_ms_per_token is what llm_demo reports (tok/s), not how long it runs.
        for name, decode_ms, fault in (("fast", 10.0, None), ("slower", 40.0, None), ("crash", 10.0, "crash")):
            behaviour = default_behaviour(False)
            behaviour["default"]["decode_ms_per_token"] = decode_ms
            for answers in behaviour["prompts"][""].values():
                answers["decode_ms_per_token"] = decode_ms
            if fault:
                behaviour["prompts"][""].setdefault("cpu/qnn", {})["fault"] = fault
            self.exports[name] = make_qwen3_export(root / "exports" / name, size_mb=1, behaviour=behaviour).path
        self.devices_yaml = self.vlab.devices_yaml
        self.locks = self.devices_yaml.parent / "locks"  # no plan dir, no option: beside devices.yaml

    def plan(self, name: str, export: str = "fast", *, slow: bool = False, **overrides) -> Path:
        data = {
            "name": name, "devices": [DEVICE],
            "models": {"qwen3": {"path": str(self.exports[export])}},
            "suites": [{"name": "matrix", "runner": "llm_demo", "models": ["qwen3"], "backends": ["qnn", "cpu"]}],
            "options": {"runtime_dir": str(self.slow_runtime if slow else self.runtime),
                        "qnn_sdk": str(self.vlab.qnn_sdk_dir),
                        "max_new_tokens": 16, "timeout_s": 120},
            "health": {"min_free_mb": 16},
            "locks": {"wait_s": 120},
            "history": {"db": str(self.root / f"{name}.sqlite"), "min_nights": 1},
        }
        data.update(overrides)
        path = self.root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    def harness(self, *args: str, cwd: Path | None = None, devices: Path | None = None) -> subprocess.Popen[str]:
        cwd = cwd or self.root
        cwd.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("HARNESS_LOCK_DIR", None)
        return subprocess.Popen([sys.executable, "-m", "harness.cli", "--file", str(devices or self.devices_yaml),
                                 *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, *args: str, **kw) -> subprocess.CompletedProcess[str]:
        proc = self.harness(*args, **kw)
        out, err = proc.communicate(timeout=600)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def night(self, plan: Path, out: str, *extra: str, **kw) -> subprocess.CompletedProcess[str]:
        return self.run("lab", "run", "--plan", str(plan), "--out", str(self.root / out), *extra, **kw)

    def wait_for_claim(self, proc: subprocess.Popen[str], limit: float = 120) -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end and proc.poll() is None:
            state = lock_state(self.locks, DEVICE)
            if state.held and state.holder is not None:
                return
            time.sleep(0.05)
        raise AssertionError(f"the night never claimed {DEVICE}: {proc.poll()} {proc.stderr and ''}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("exitcodes"))
    yield lab
    lab.vlab.stop()


def _counts(lab: Lab, out: str) -> dict:
    return json.loads((lab.root / out / "night.json").read_text())["counts"]


def _no_claim_left(lab: Lab) -> None:
    state = lock_state(lab.locks, DEVICE)
    assert not state.held and state.holder is None, state.describe()


def test_0_every_test_passed_and_the_last_line_counts(lab):
    run = lab.night(lab.plan("good"), "good")
    assert run.returncode == ExitCode.OK, run.stdout + run.stderr
    c = _counts(lab, "good")
    # The export's quantization check (run once, before the claim), 2 pairs x 2 prompts, and
    # the export's verdict over them.
    assert c["passed"] == 6 and c["failed"] == c["error"] == c["quarantined"] == 0
    assert run.stdout.strip().splitlines()[-1] == "6 passed, 0 failed, 0 error, 0 skipped, 0 quarantined, 0 flaky"
    _no_claim_left(lab)


def test_1_a_test_failed(lab):
    run = lab.night(lab.plan("crashing", export="crash"), "crashing")
    assert run.returncode == ExitCode.TESTS_FAILED, run.stdout + run.stderr
    c = _counts(lab, "crashing")
    # The crashes fail their records; the export's verdict judges only what answered (CPU).
    assert c["failed"] == 2 and c["passed"] == 4
    assert run.stdout.strip().splitlines()[-1].startswith("4 passed, 2 failed, 0 error, 0 skipped")


def test_1_a_regression_unless_opted_out(lab):
    base = lab.night(lab.plan("reg-a", export="fast"), "reg-a-1")
    assert base.returncode == ExitCode.OK, base.stdout + base.stderr
    # One fast night is both histories' baseline (a night less: each costs ~10 s of CPU)
    src, dst = sqlite3.connect(lab.root / "reg-a.sqlite"), sqlite3.connect(lab.root / "reg-b.sqlite")
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    for db, extra, expected in (("reg-a", (), ExitCode.TESTS_FAILED),
                                ("reg-b", ("--no-fail-on-regression",), ExitCode.OK)):
        slow = lab.night(lab.plan(db, export="slower"), f"{db}-2", *extra)  # same history, slower decode
        assert slow.returncode == expected, slow.stdout + slow.stderr
        assert "regression:" in slow.stdout and _counts(lab, f"{db}-2")["regressions"] > 0
        assert slow.stdout.strip().splitlines()[-1].endswith("regressions")


def test_1_the_device_stayed_busy_and_the_holder_is_named(lab):
    other = DeviceLock(lab.locks, DEVICE, "someone-elses-night", purpose="night")
    other.acquire(5)
    try:
        run = lab.night(lab.plan("busy", locks={"wait_s": 1}), "busy")
    finally:
        other.release()
    assert run.returncode == ExitCode.TESTS_FAILED, run.stdout + run.stderr
    assert "run someone-elses-night" in run.stderr and f"pid {os.getpid()}" in run.stderr
    c = _counts(lab, "busy")
    # The export's quantization check needs no device: decided before the claim, it stands.
    assert c["busy"] == 1 and c["passed"] == 1 and c["skipped"] == 1
    assert run.stdout.strip().splitlines()[-1].endswith("1 busy")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_2_interrupted(lab, signum):
    out = f"stopped-{signum}"
    proc = lab.harness("lab", "run", "--plan", str(lab.plan(out, slow=True)), "--out", str(lab.root / out))
    lab.wait_for_claim(proc)
    records = lab.root / out / "records.jsonl"
    end = time.monotonic() + 120
    while time.monotonic() < end and not (records.exists() and read_records(records)):
        time.sleep(0.1)  # interrupt after the first result, while llm_demo runs the next pair
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.INTERRUPTED, stdout + stderr
    assert "Traceback" not in stderr and "[interrupted]" in stdout
    meta = json.loads((lab.root / out / "night.json").read_text())
    assert meta["interrupted"] and meta["counts"]["passed"] >= 1
    _no_claim_left(lab)


def test_3_internal_error(lab):
    """A harness bug inside a job (here: the real llm_demo job, then a Python exception)."""
    from harness.lab import for_night, jobs, run_night
    from harness.lab.plan import load_plan

    def buggy_job(ctx):
        yield from jobs.llm_matrix_job(ctx)
        raise KeyError("a harness bug")

    night = run_night(load_plan(lab.plan("buggy")), lab.vlab.inventory, lab.root / "buggy", buggy_job,
                      say=lambda _m: None)
    # The job delivered its 4 cells and the export's verdict before its bug (a bare job
    # function runs no export checks: those come with SuiteJob).
    assert night.counts.internal_errors == 1 and night.counts.passed == 5
    assert for_night(night) == ExitCode.INTERNAL_ERROR


def test_4_usage_plan_and_inventory_errors(lab):
    bad_env = lab.plan("bad-env", options={"runtime_dir": str(lab.runtime), "env": {"MNN-LOG": "1"}})
    run = lab.night(bad_env, "bad-env")
    assert run.returncode == ExitCode.USAGE_ERROR and "key 'options.env'" in run.stderr and "MNN-LOG" in run.stderr
    no_runtime = lab.plan("no-runtime", options={"runtime_dir": str(lab.root / "absent")})
    run = lab.night(no_runtime, "no-runtime")
    assert run.returncode == ExitCode.USAGE_ERROR and "key 'options.runtime_dir'" in run.stderr
    assert not (lab.root / "no-runtime").exists()  # nothing ran, nothing claimed
    run = lab.night(lab.plan("good"), "x", devices=lab.root / "no-devices.yaml")
    assert run.returncode == ExitCode.USAGE_ERROR and "no-devices.yaml" in run.stderr
    run = lab.run("lab", "run", "--plan")
    assert run.returncode == ExitCode.USAGE_ERROR and "usage:" in run.stderr
    run = lab.run("push", "--device", "nope", str(lab.exports["fast"]))
    assert run.returncode == ExitCode.USAGE_ERROR and "no device named 'nope'" in run.stderr
    assert "Traceback" not in run.stderr


def test_5_nothing_ran(lab):
    run = lab.night(lab.plan("nobody", devices=[], tags=["car"]), "nobody")
    assert run.returncode == ExitCode.NO_TESTS_RAN, run.stdout + run.stderr
    assert "no device" in run.stderr and "car" in run.stderr


def test_two_nights_from_two_folders_never_drive_the_device_at_once(lab):
    """Same devices.yaml and plan, started from two folders (the reported bug: a relative
    default lock folder per working folder let both drive the phone)."""
    plan = lab.plan("twice", slow=True)
    first = lab.harness("lab", "run", "--plan", str(plan), cwd=lab.root / "folder-a")
    lab.wait_for_claim(first)
    second = lab.harness("lab", "run", "--plan", str(plan), cwd=lab.root / "folder-b")
    out1, err1 = first.communicate(timeout=600)
    out2, err2 = second.communicate(timeout=600)
    assert first.returncode == second.returncode == ExitCode.OK, err1 + err2
    night1 = json.loads((lab.root / "folder-a" / "lab-out" / "night.json").read_text())
    assert f"{DEVICE}: in use by night host" in err2 and f"run {night1['run_id']}" in err2
    recs1 = read_records(lab.root / "folder-a" / "lab-out" / "records.jsonl")
    recs2 = read_records(lab.root / "folder-b" / "lab-out" / "records.jsonl")
    assert len(recs1) == len(recs2) == 6  # quant, 2 pairs x 2 prompts, the export's verdict
    # Every device run of the second night started after the first night's last result (its
    # export check needs no device and is decided before the claim).
    on_device = [r for r in recs2 if "decided" not in r.extras]
    assert len(on_device) == 5
    assert min(r.started_at - r.duration_s for r in on_device) >= max(r.started_at for r in recs1)
    _no_claim_left(lab)


def test_push_waits_for_a_night_and_gives_up_after_its_timeout(lab):
    # Over 6 s of llm_demo: status, a refused push and a waiting push all start within it.
    night = lab.harness("lab", "run", "--plan", str(lab.plan("pushed-under", slow=True)),
                        "--out", str(lab.root / "pushed-under"))
    lab.wait_for_claim(night)
    status = lab.run("lab", "status", cwd=lab.root / "elsewhere")  # no options, another folder
    assert status.returncode == 0 and f"claims in {lab.locks}" in status.stdout, status.stderr
    row = next(ln for ln in status.stdout.splitlines() if ln.startswith(DEVICE))
    assert "held by night host" in row, status.stdout
    impatient = lab.run("push", "--device", DEVICE, "--lock-timeout", "0.5", str(lab.exports["fast"]))
    assert impatient.returncode == ExitCode.TESTS_FAILED, impatient.stderr
    assert f"{DEVICE}: in use by night host" in impatient.stderr and "--lock-timeout" in impatient.stderr
    push = lab.harness("push", "--device", DEVICE, str(lab.exports["crash"]))
    time.sleep(1.0)
    assert lock_state(lab.locks, DEVICE).holder.purpose == "night", "the night ended too early for this test"
    push_out, push_err = push.communicate(timeout=600)
    pushed_at = time.time()
    night.communicate(timeout=600)
    assert night.returncode == ExitCode.OK and push.returncode == ExitCode.OK, push_err
    assert f"{DEVICE}: in use by night host" in push_err and "waiting up to 600 s" in push_err
    recs = read_records(lab.root / "pushed-under" / "records.jsonl")
    assert max(r.started_at for r in recs) <= pushed_at and "files" in push_out
    _no_claim_left(lab)


def test_a_pytest_device_session_claims_the_device(lab, tmp_path):
    test = tmp_path / "test_on_device.py"
    test.write_text("def test_uses_the_device(transport):\n    assert transport.shell(['true']).ok\n")
    cmd = [sys.executable, "-m", "pytest", str(test), "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--device", DEVICE, "--devices-file", str(lab.devices_yaml), "--lock-timeout", "0.5"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("HARNESS_LOCK_DIR", None)
    other = DeviceLock(lab.locks, DEVICE, "a-night", purpose="night")
    other.acquire(5)
    try:
        busy = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    finally:
        other.release()
    assert busy.returncode == 1 and "in use by night host" in busy.stdout + busy.stderr, busy.stdout
    assert "run a-night" in busy.stdout + busy.stderr
    free = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert free.returncode == 0, free.stdout + free.stderr
    _no_claim_left(lab)
