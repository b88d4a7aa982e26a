"""`harness bisect --axis inputs` on a recipe repository of 13 commits, one of which plants a fault
that makes the QNN pair's llm_demo crash on a virtual OnePlus 13: the faulty commit is named in at
most ceil(log2(n)) + 1 exports, and the versions built before (the night's export of the bad
point, an earlier bisection's) come from the export cache."""

from __future__ import annotations

import json
import math

import pytest

from harness.cli import main
from tests.bisect.recipe_kit import make_recipe_repo, write_plan

pytestmark = pytest.mark.slow
TESTCASE = "test_generation[qnn-france]"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "harness-cache"))


def test_bisect_names_the_commit_that_planted_the_fault(vlab, tmp_path, capsys):
    shas = make_recipe_repo(tmp_path / "repo", n=13, fault_at=8)
    plan = write_plan(tmp_path / "plan.json", tmp_path / "repo", vlab.runtime_dir("v79"), vlab.qnn_sdk_dir, "oneplus13")
    devices = str(vlab.devices_yaml)
    # The night's export stage built the bad point (HEAD): the bisection's first step is served.
    assert main(["--file", devices, "export", "--plan", str(plan), "--out", str(tmp_path / "night")]) == 0
    argv = ["--file", devices, "bisect", "--plan", str(plan), "--device", "oneplus13", "--testcase", TESTCASE,
            "--axis", "inputs"]
    assert main([*argv, "--good", shas[0], "--bad", shas[-1], "--out", str(tmp_path / "b1")]) == 0
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "b1" / "bisect.json").read_text())
    assert result["first_new_version"].startswith(shas[8][:10]) and "plant the seed fault" in out, out
    assert not result["fixes"] and "introduces" in result["answer"]
    steps = {s["index"]: s for s in result["steps"]}
    assert steps[12]["export_cache"] == "hit", "the bad point was built by the night"
    assert result["exports_built"] + result["exports_cached"] == len(steps) <= math.ceil(math.log2(13)) + 1, result
    # The neighbours' evidence: the first bad crashes, the last good passes.
    assert steps[8]["failure_class"] == "crash" and steps[7]["status"] == "passed", steps
    # JUnit, HTML and history written through the night's reporters.
    assert "test_bisect[test_generation[qnn-france]]" in (tmp_path / "b1" / "junit.xml").read_text()
    assert (tmp_path / "b1" / "report.html").is_file() and (tmp_path / "history.sqlite").is_file()

    # A narrower bisection later (the bad point's class given): the version it needs was built
    # by the first one, from the cache.
    assert main([*argv, "--good", shas[6], "--bad", shas[8], "--failure-class", "crash",
                 "--out", str(tmp_path / "b2")]) == 0
    again = json.loads((tmp_path / "b2" / "bisect.json").read_text())
    assert again["first_new_version"].startswith(shas[8][:10]) and again["exports_built"] == 0, again
    assert [(s["index"], s["export_cache"]) for s in again["steps"]] == [(7, "hit")]
