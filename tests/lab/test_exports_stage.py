"""The export stage's mechanics with a small fake exporter (tests/lab/fake_exporter.py): the
testcases, the cache (hits, --rebuild-exports, corrupt and partial entries, LRU), the failure
classes, timeouts and parallelism."""

from __future__ import annotations

import json
import shutil

import pytest
from exportkit import FAKE_ARGV, fake_env, run_stage, runs, write_exports_plan

from harness.lab.exports import ENTRY_FILE, export_status
from harness.lab.plan import load_plan
from harness.report import junit_document


def _plan(tmp_path, **build):
    b = {"model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650", "SA8295"], "formats": ["16a4w", "8a8w"],
         "inputs": ["recipe.txt"], "timeout_s": 60, **build}
    return load_plan(write_exports_plan(tmp_path, builds=[b]))


def test_each_target_and_format_is_a_testcase_laid_out_for_the_suites(tmp_path):
    plan = _plan(tmp_path)
    stage, said = run_stage(plan, tmp_path, env=fake_env(tmp_path, "sa8295-16a4w=traceback"))
    by = {r.name: r for r in stage.records}
    assert sorted(by) == ["test_export[tiny-sa8295-16a4w]", "test_export[tiny-sa8295-8a8w]", "test_export[tiny-sm8650-16a4w]",
                          "test_export[tiny-sm8650-8a8w]"]
    failed = by["test_export[tiny-sa8295-16a4w]"]
    assert failed.status == "failed" and failed.failure_class == "export-python-error"
    assert "ValueError: the recipe names a layer" in failed.message and failed.device == "lab-host"
    assert "fake exporter: sa8295-16a4w" in failed.text and failed.log_excerpt
    assert by["test_export[tiny-sm8650-8a8w]"].status == "passed"
    sa = tmp_path / "out" / "exports" / "tiny" / "SA8295"
    assert (sa / "8a8w" / "model.pte").is_file() and not (sa / "16a4w").exists()
    assert export_status(sa)["16a4w"]["reason"].startswith("test_export[tiny-sa8295-16a4w] export-python-error")
    assert stage.plan_for(plan).models["tiny"].path_for(_dev("SA8295")) == sa
    xml = junit_document(stage.records)
    assert 'name="export_cache" value="miss"' in xml and 'classname="lab-host.exports.tiny"' in xml
    assert any("FAILED export-python-error" in line for line in said)


def _dev(soc):
    from harness.inventory import LOCAL, DeviceSpec

    return DeviceSpec(name="d", transport=LOCAL, soc_model=soc, soc_id=0, htp_arch="", vtcm_mb=0, work_dir="/tmp")


def test_second_run_is_all_cache_hits_and_rebuild_forces(tmp_path):
    plan = _plan(tmp_path)
    env = fake_env(tmp_path, "sa8295-16a4w=qnn-v68")
    run_stage(plan, tmp_path, env=env)
    assert len(runs(tmp_path)) == 4
    stage, _ = run_stage(plan, tmp_path, env=env, out="out2")
    assert len(runs(tmp_path)) == 4, "an unchanged export is never built twice (a failed one neither)"
    assert {_build(r).cache.value for r in stage.records} == {"hit"}
    assert [r.status for r in stage.records].count("failed") == 1
    assert 'name="export_cache" value="hit"' in junit_document(stage.records)
    stage, _ = run_stage(plan, tmp_path, env=env, out="out3", rebuild=True)
    assert len(runs(tmp_path)) == 8 and {_build(r).cache.value for r in stage.records} == {"rebuilt"}


def test_changed_input_or_env_rebuilds_only_what_changed(tmp_path):
    plan = _plan(tmp_path, formats=["8a8w"])
    run_stage(plan, tmp_path, env=fake_env(tmp_path))
    (tmp_path / "recipe.txt").write_text("recipe 2\n")
    run_stage(plan, tmp_path, env=fake_env(tmp_path), out="o2")
    assert sorted(runs(tmp_path)) == ["sa8295-8a8w"] * 2 + ["sm8650-8a8w"] * 2
    plan = _plan(tmp_path, formats=["8a8w"], targets=["SM8650"], env={"SEED": "3"})
    run_stage(plan, tmp_path, env=fake_env(tmp_path), out="o3")
    assert len(runs(tmp_path)) == 5


@pytest.mark.parametrize("damage", ["truncate", "no-entry-json", "extra-file", "garbage-json"])
def test_a_corrupt_or_partial_entry_is_rebuilt_never_used(tmp_path, damage):
    plan = _plan(tmp_path, targets=["SM8650"], formats=["8a8w"])
    first, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path))
    entry = first.results[0].folder.parent
    if damage == "truncate":
        (entry / "out" / "model.pte").write_bytes(b"short")
    elif damage == "no-entry-json":
        (entry / ENTRY_FILE).unlink()
    elif damage == "extra-file":
        (entry / "out" / "stray.bin").write_bytes(b"x")
    else:
        (entry / ENTRY_FILE).write_text("{not json")
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path), out="o2")
    r = stage.results[0]
    assert r.ok and r.cache.value == "repaired" and len(runs(tmp_path)) == 2
    assert "removed, rebuilding" in stage.records[0].message
    assert json.loads((r.folder.parent / ENTRY_FILE).read_text())["status"] == "passed"
    assert not (r.folder / "stray.bin").exists() and (r.folder / "model.pte").stat().st_size > 5


def test_lru_eviction_keeps_this_runs_entries(tmp_path):
    small = _plan(tmp_path, targets=["SM8650"], formats=["8a8w"])
    run_stage(small, tmp_path, env=fake_env(tmp_path))
    other = _plan(tmp_path, targets=["SA8295"], formats=["8a8w"])
    object.__setattr__(other.exports, "cache_max_bytes", 1)
    stage, said = run_stage(other, tmp_path, env=fake_env(tmp_path), out="o2")
    entries = sorted(p.name for p in (tmp_path / "cache" / "entries").iterdir())
    assert entries == [stage.results[0].key], "the older entry went, this run's stayed"
    assert any("least recently used removed" in s for s in said)


@pytest.mark.parametrize("mode, cls, words, cached", [
    ("segv", "export-crash", "SIGSEGV", True),
    ("sigkill", "export-killed-for-memory", "OOM killer", False),
    ("missing-module", "export-missing-tool", "No module named 'executorch'", False),
    ("empty", "export-no-output", "wrote nothing", True),
    ("wrong-target", "export-invalid", "not for SM8650", True),
])
def test_failures_are_classified_and_only_deterministic_ones_cached(tmp_path, mode, cls, words, cached):
    plan = _plan(tmp_path, targets=["SM8650"], formats=["8a8w"])
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path, f"sm8650-8a8w={mode}"))
    rec = stage.records[0]
    assert (rec.status, rec.failure_class) == ("failed", cls) and words in rec.message, rec.message
    assert rec.status != "error", "an export's failure is never a harness error"
    assert (tmp_path / "out" / "exports" / "logs" / "tiny" / "sm8650-8a8w.log").is_file()
    run_stage(plan, tmp_path, env=fake_env(tmp_path, f"sm8650-8a8w={mode}"), out="o2")
    assert len(runs(tmp_path)) == (1 if cached else 2)


def test_a_program_that_cannot_start_and_a_timeout(tmp_path):
    plan = _plan(tmp_path, targets=["SM8650"], formats=["8a8w"], command=["/no/such/exporter", "--out", "{out}"])
    rec = run_stage(plan, tmp_path, env=fake_env(tmp_path))[0].records[0]
    assert rec.failure_class == "export-missing-tool" and "/no/such/exporter" in rec.message
    plan = _plan(tmp_path, targets=["SM8650"], formats=["8a8w"], timeout_s=0.5)
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path, "sm8650-8a8w=sleep"), out="o2")
    rec = stage.records[0]
    assert rec.failure_class == "export-timeout" and "0.5 s" in rec.message and stage.results[0].duration_s < 5
    assert not list((tmp_path / "cache" / "tmp").glob("*")), "no build folder left behind"


def test_parallel_bounds_how_many_run_at_once(tmp_path):
    def spans(parallel, out):
        times = tmp_path / f"times-{parallel}"
        plan = load_plan(write_exports_plan(tmp_path, builds=[{
            "model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650", "SA8295"], "formats": ["a", "b"]}],
            parallel=parallel))
        modes = ",".join(f"{s}-{f}=slow" for s in ("sm8650", "sa8295") for f in ("a", "b"))
        run_stage(plan, tmp_path, env=fake_env(tmp_path, modes, FAKE_EXPORT_TIMES=str(times)), out=out,
                  rebuild=True)
        return sorted(tuple(map(float, ln.split())) for ln in times.read_text().splitlines())

    def most_at_once(s):
        return max(sum(1 for a, b in s if a <= t < b) for t, _ in s)

    assert most_at_once(spans(1, "p1")) == 1
    assert most_at_once(spans(2, "p2")) == 2
    shutil.rmtree(tmp_path / "cache")


def _build(rec):
    from harness.evidence import ExportBuild

    build = rec.evidence.get(ExportBuild)
    assert build is not None, rec.name
    return build
