"""The export stage inside a night (run_night): its testcases first, before any claim; the
devices' entries get the night's export folders; the suites' testcases of a failed export are
skipped with "export failed: ..."; the night exits 1 and says why. The suite here is a small job
of our own that reports one testcase per format folder it finds, as the ExecuTorch suite does."""

from __future__ import annotations

import pytest
from exportkit import FAKE_ARGV, fake_env, write_exports_plan, write_soc_inventory

from harness.inventory import load_inventory
from harness.lab import ExitCode, for_night, run_night
from harness.lab.exports import failed_export_lines
from harness.lab.plan import load_plan
from harness.pairs import Backend, BackendPair
from harness.report import TestRecord
from harness.verdict import Verdict


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "harness-cache"))


def format_job(ctx):
    """One testcase per format: passed when the format's export folder is there."""
    for fmt in ("16a4w", "8a8w"):
        pte = ctx.entry.model.path / fmt / "model.pte"
        rec = TestRecord(name=f"test_quant_format_runs[{fmt}]", suite=ctx.entry.suite.name, device=ctx.device.name,
                         backend_pair=BackendPair(Backend.QNN, variant=fmt))
        if not pte.is_file():
            rec.set_verdict(Verdict.skipped(f"no {fmt} program in {ctx.entry.model.path}"))
        yield rec


def test_night_exports_first_then_skips_what_failed(tmp_path, monkeypatch):
    plan = load_plan(write_exports_plan(tmp_path, builds=[{
        "model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650", "SA8295"], "formats": ["16a4w", "8a8w"]}]))
    inv = load_inventory(write_soc_inventory(tmp_path, ("SM8650", "SA8295", "SM8750")))
    for k, v in fake_env(tmp_path, "sa8295-16a4w=qnn-v68").items():
        monkeypatch.setenv(k, v)
    said: list[str] = []
    result = run_night(plan, inv, tmp_path / "night", format_job, lock_dir=tmp_path / "locks", say=said.append)
    recs = result.records()
    exports = [r for r in recs if r.suite == "exports"]
    assert [r.name for r in recs[:4]] == [r.name for r in exports], "the exports are the night's first testcases"
    failed = next(r for r in exports if r.status == "failed")
    assert failed.name == "test_export[tiny-sa8295-16a4w]" and failed.device == "lab-host"
    by = {(r.device, r.name): r for r in recs if r.suite != "exports"}
    assert by[("emu-sm8650", "test_quant_format_runs[16a4w]")].status == "passed"
    assert by[("emu-sa8295", "test_quant_format_runs[8a8w]")].status == "passed"
    skipped = by[("emu-sa8295", "test_quant_format_runs[16a4w]")]
    assert skipped.status == "skipped" and skipped.message.startswith("export failed: test_export[tiny-sa8295-16a4w] ")
    other = by[("emu-sm8750", "executorch_qnn/tiny#1")]
    assert other.status == "skipped" and "not exported for SM8750" in other.message
    assert for_night(result) is ExitCode.TESTS_FAILED
    lines = failed_export_lines(recs)
    assert len(lines) == 1 and lines[0].startswith("export failed: test_export[tiny-sa8295-16a4w] tiny [")
    junit = (tmp_path / "night" / "junit.xml").read_text()
    assert "test_export[tiny-sa8295-16a4w]" in junit and 'name="export_cache"' in junit
    assert any(s.startswith("exports: 4 to build") for s in said)


def test_harness_export_runs_only_the_stage(tmp_path, monkeypatch, capsys):
    from harness.cli import main

    plan = write_exports_plan(tmp_path, builds=[{
        "model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650", "SA8295"], "formats": ["16a4w", "8a8w"]}])
    for k, v in fake_env(tmp_path, "sa8295-16a4w=qnn-v68").items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--plan", str(plan), "--target", "SA8295", "--out", str(tmp_path / "e1")]) == 1
    out = capsys.readouterr().out
    assert "export failed: test_export[tiny-sa8295-16a4w]" in out and "1 built, 1 failed" in out
    assert "sm8650" not in out and (tmp_path / "e1" / "junit.xml").is_file()
    assert main(["export", "--plan", str(plan), "--format", "8a8w", "--out", str(tmp_path / "e2")]) == 0
    # SA8295 8a8w was built by the first run: served from the cache, not counted as built
    assert "1 built, 1 from the cache, 0 failed" in capsys.readouterr().out
    assert main(["export", "--plan", str(plan), "--target", "SM8750", "--out", str(tmp_path / "e3")]) == 4
    assert "not a target of the plan" in capsys.readouterr().err
