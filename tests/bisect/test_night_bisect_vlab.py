"""A plan's `bisect:`: the night after a recipe commit planted a fault bisects its new failure
between last night's commit (it passed) and tonight's (it fails), both taken from the history,
and names the faulty commit; the nights wrote a repro bundle for the failed cell."""

from __future__ import annotations

import json

import pytest

from harness.bisect import AxisKind, night_hook, points_from_history
from harness.lab import jobs, run_night
from harness.lab.plan import load_plan
from tests.bisect.recipe_kit import git, make_recipe_repo, write_plan

pytestmark = pytest.mark.slow


def test_the_night_bisects_its_new_failure(vlab, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    shas = make_recipe_repo(repo, n=5, fault_at=3)
    path = write_plan(tmp_path / "plan.json", repo, vlab.runtime_dir("v79"), vlab.qnn_sdk_dir, "oneplus13")
    data = json.loads(path.read_text())
    data["bisect"] = {"axis": "inputs", "budget_s": 600, "max_failures": 1}
    data["history"] = {"db": str(tmp_path / "history.sqlite")}  # both nights' (each has its own --out)
    path.write_text(json.dumps(data))

    git(repo, "checkout", "-q", shas[1])  # last night's recipe: healthy
    after = night_hook(vlab.inventory, say=print)  # what `harness lab run` runs after the reports
    first = run_night(load_plan(path), vlab.inventory, tmp_path / "n1", jobs.suite_job, after=after)
    assert all(not r.is_bad for r in first.records()), [(r.name, r.message) for r in first.records() if r.is_bad]
    assert not (tmp_path / "n1" / "bisect").exists()

    git(repo, "checkout", "-q", "main")  # tonight's: the fault is in
    said: list[str] = []
    after = night_hook(vlab.inventory, say=said.append)
    second = run_night(load_plan(path), vlab.inventory, tmp_path / "n2", jobs.suite_job, say=said.append, after=after)
    bad = [r for r in second.records() if r.is_bad]
    assert bad and all(r.failure_class == "crash" for r in bad)
    assert (tmp_path / "n2" / "bundles" / "oneplus13").is_dir()
    points = points_from_history(tmp_path / "history.sqlite", "oneplus13", bad[0].name, AxisKind.INPUTS)
    assert (points.good, points.bad, points.failure_class) == (shas[1], shas[4], "crash")
    results = list((tmp_path / "n2" / "bisect" / "oneplus13").glob("*/bisect.json"))
    assert len(results) == 1, said
    result = json.loads(results[0].read_text())
    assert result["first_new_version"].startswith(shas[3][:10]), result
    assert "plant the seed fault" in "\n".join(said)
    assert "test_bisect[" in (results[0].parent / "junit.xml").read_text()
