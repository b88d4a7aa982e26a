"""A lab night on the host as a `local` device with the real llm_demo from a build tree and no
QNN SDK: the CPU pair runs and is judged (no ArtifactError about QNN libraries)."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.lab import jobs
from harness.inventory import load_inventory
from harness.lab.plan import load_plan
from harness.lab.scheduler import run_night
from tests.real_runtime.realrt import REAL_EXPORT, make_build_tree, real_runtime_or_skip


def test_night_on_the_host_runs_the_cpu_pair(tmp_path: Path) -> None:
    real_runtime_or_skip()
    tree = make_build_tree(tmp_path / "build")
    devices = tmp_path / "devices.yaml"
    devices.write_text(yaml.safe_dump({"devices": [{"name": "host", "transport": "local",
                                                    "work_dir": str(tmp_path / "work")}]}))
    plan = tmp_path / "night.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "host-night", "devices": ["host"],
        "models": {"smollm2": {"path": str(REAL_EXPORT)}},
        "suites": [{"name": "matrix", "runner": "llm_demo", "models": ["smollm2"]}],
        "options": {"runtime_dir": str(tree), "max_new_tokens": 64, "timeout_s": 300},
        "health": {"min_free_mb": 16},
    }))
    night = run_night(load_plan(plan), load_inventory(devices), tmp_path / "out", jobs.llm_matrix_job,
                      lock_dir=tmp_path / "locks", reports=False)
    recs = {r.name: r for r in night.records()}
    assert set(recs) == {"matrix::cpu::france", "matrix::cpu::cat"}, [(r.name, r.status, r.message) for r in recs.values()]
    assert recs["matrix::cpu::france"].status == "passed" and recs["matrix::cpu::france"].verdict == "coherent"
    cat = recs["matrix::cpu::cat"]
    assert cat.status == "failed" and cat.failure_class == "garbled" and cat.duration_s > 0
    assert recs["matrix::cpu::france"].soc_model == "host"
