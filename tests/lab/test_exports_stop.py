"""Ctrl-C / SIGTERM during the export stage, with a real process tree (an exporter that started a
child and a grandchild): every process of it ends, nothing partial is left in the cache or at a
final path, and the night (or `harness export`) exits 2. The 2-second bound is measured by
benchmarks/export_cache.py, not asserted here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from exportkit import FAKE_ARGV, fake_env, run_stage, write_exports_plan, write_soc_inventory

from harness.lab.plan import load_plan

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "harness-cache"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_pids(base: Path, n: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = sorted(base.parent.glob(base.name + ".*"))
        files = [f for f in files if not f.name.endswith(".tmp")]
        if len(files) >= n:
            return [int(p) for f in files for p in f.read_text().split()]
        time.sleep(0.05)
    raise AssertionError(f"the exporters did not start their trees within {timeout} s")


def _nothing_partial(cache: Path, out: Path) -> None:
    assert not [p for p in (cache / "tmp").glob("*") if p.is_dir()], "a build folder was left in the cache"
    assert not list((cache / "entries").glob("*")) if (cache / "entries").exists() else True
    for status in out.glob("exports/*/*/exports.json"):
        assert all(v["status"] != "passed" for v in json.loads(status.read_text()).values())
    assert not [p for p in out.glob("exports/*/*/*") if p.is_symlink() or p.is_dir()], "a partial export at a final path"


def test_stop_ends_the_whole_tree_and_keeps_nothing(tmp_path):
    plan = load_plan(write_exports_plan(tmp_path, builds=[{
        "model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650"], "formats": ["16a4w", "8a8w"]}], parallel=2))
    pids_base = tmp_path / "pids"
    env = fake_env(tmp_path, "sm8650-16a4w=tree,sm8650-8a8w=tree", FAKE_EXPORT_PIDS=str(pids_base))
    stop = threading.Event()
    box = {}
    t = threading.Thread(target=lambda: box.update(r=run_stage(plan, tmp_path, env=env, stop=stop)))
    t.start()
    pids = _wait_pids(pids_base, 2)
    assert len(pids) == 6 and all(_alive(p) for p in pids)
    stop.set()
    t.join(30)
    assert not t.is_alive()
    stage, _ = box["r"]
    assert not [p for p in pids if _alive(p)], "an export process outlived the stop"
    assert stage.interrupted and {r.status for r in stage.records} == {"error"}
    assert {r.failure_class for r in stage.records} == {"interrupted"}
    _nothing_partial(tmp_path / "cache", tmp_path / "out")


def test_a_setsid_helper_left_by_a_finished_export_is_ended(tmp_path):
    """An exporter that exits 0 leaving a helper in a session of its own (out of the group a
    group kill reaches): the helper ends with the export (issue 36)."""
    plan = load_plan(write_exports_plan(tmp_path, builds=[{
        "model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650"], "formats": ["8a8w"]}]))
    pids_base = tmp_path / "pids"
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path, "sm8650-8a8w=daemon", FAKE_EXPORT_PIDS=str(pids_base)))
    assert stage.results[0].ok, stage.records[0].message
    (helper,) = _wait_pids(pids_base, 1)
    try:
        assert not _alive(helper), "the export's setsid() helper outlived it"
    finally:
        if _alive(helper):
            os.kill(helper, signal.SIGKILL)


@pytest.mark.parametrize("command, sig", [(["lab", "run"], signal.SIGINT), (["export"], signal.SIGTERM)])
def test_the_night_and_harness_export_exit_2_on_a_signal(tmp_path, command, sig):
    plan = write_exports_plan(tmp_path, builds=[{
        "model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650", "SA8295"], "formats": ["8a8w"]}], parallel=2)
    inv = write_soc_inventory(tmp_path)
    pids_base = tmp_path / "pids"
    path = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = fake_env(tmp_path, "sm8650-8a8w=tree,sa8295-8a8w=tree", FAKE_EXPORT_PIDS=str(pids_base),
                   HARNESS_CACHE_DIR=str(tmp_path / "harness-cache"), PYTHONPATH=path)
    out = tmp_path / "night"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "--file", str(inv), *command, "--plan", str(plan),
                             "--out", str(out)], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        pids = _wait_pids(pids_base, 2)
        os.kill(proc.pid, sig)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, output
    assert not [p for p in pids if _alive(p)], "an export process outlived the harness"
    _nothing_partial(tmp_path / "harness-cache" / "exports", out)
    if command == ["lab", "run"]:
        night = json.loads((out / "night.json").read_text())
        assert night["interrupted"] is True and night["outcomes"] == {}, "no device was claimed"
        assert "[interrupted]" in output
