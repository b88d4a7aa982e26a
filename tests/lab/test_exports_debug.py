"""The export stage's debug builds (docs/exports.md#debug-builds): a build's `debug_args` are the
exporter's arguments for its debug program; the stage appends them, as one more export with its own
cache key, when a suite of that model localizes (`localize: true`) or the build says `debug: true`.
It lays the debug build out where the localize check finds it, validates it as a debug build, caches
it, and a failed one skips only its format's localization (tests/lab/exportkit.py, fake_exporter.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from exportkit import FAKE_ARGV, fake_env, run_stage, runs, write_exports_plan, write_soc_inventory

from harness.checks.localize import debug_files_for
from harness.inventory import load_inventory
from harness.lab import ExitCode, for_error, run_night
from harness.lab.exports import cache as export_cache
from harness.lab.plan import PlanError, load_plan
from harness.pairs import Backend, BackendPair
from harness.report import TestRecord
from harness.verdict import Verdict

LOCALIZE_SUITE = {"name": "executorch_qnn", "models": ["tiny"], "localize": True}


def _build(**over):
    b = {"model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650"], "formats": ["16a4w"],
         "debug_args": ["--debug-program"]}
    b.update(over)
    return {k: v for k, v in b.items() if v is not None}  # None: the key left out


def _plan(tmp_path: Path, *, localize: bool = True, **over):
    suites = [LOCALIZE_SUITE if localize else {"name": "executorch_qnn", "models": ["tiny"]}]
    return load_plan(write_exports_plan(tmp_path, builds=[_build(**over)], suites=suites))


def test_a_localized_model_gets_its_debug_build_as_its_own_export(tmp_path: Path) -> None:
    plain = _plan(tmp_path, localize=False).exports
    assert plain is not None and [j.testcase for j in plain.jobs(())] == ["test_export[tiny-sm8650-16a4w]"]
    spec = _plan(tmp_path).exports
    assert spec is not None
    jobs = spec.jobs(())
    assert [j.testcase for j in jobs] == ["test_export[tiny-sm8650-16a4w]", "test_export[tiny-sm8650-16a4w-debug]"]
    assert jobs[1].argv(tmp_path / "o")[-2:] == [str(tmp_path / "o"), "--debug-program"]
    assert "--debug-program" not in jobs[0].argv(tmp_path / "o")
    material = [export_cache.key_material(j, "inputs", {"qairt": "2.49"}) for j in jobs]
    assert export_cache.export_key(material[0]) != export_cache.export_key(material[1])
    # Declaring debug_args rebuilds nothing already cached: the plain key does not name them.
    bare_spec = _plan(tmp_path, localize=False, debug_args=None).exports
    assert bare_spec is not None
    (bare,) = bare_spec.jobs(())
    assert export_cache.key_material(bare, "inputs", {"qairt": "2.49"}) == material[0]


def test_debug_true_asks_for_it_without_a_localizing_suite(tmp_path: Path) -> None:
    spec = _plan(tmp_path, localize=False, debug=True).exports
    assert spec is not None and [j.id for j in spec.jobs(())] == ["sm8650-16a4w", "sm8650-16a4w-debug"]


def test_a_shell_command_gets_its_debug_args_quoted(tmp_path: Path) -> None:
    spec = _plan(tmp_path, command="python exporter.py --out {out}", shell=True,
                 debug_args=["--debug-program", "--note", "a b;c"]).exports
    assert spec is not None
    argv = spec.jobs(())[1].argv(tmp_path / "o")
    assert argv[-1].endswith(f"--out {tmp_path / 'o'} --debug-program --note 'a b;c'"), argv


@pytest.mark.parametrize("over, key, words", [
    ({"debug_args": None, "debug": True}, "exports.builds[0].debug", "has no `debug_args`"),
    ({"debug_args": []}, "exports.builds[0].debug_args", "is empty"),
    ({"debug_args": "--debug-program"}, "exports.builds[0].debug_args", "list"),
    ({"debug_args": ["--dir", "{chip}"]}, "exports.builds[0].debug_args[1]", "{chip} is not a placeholder"),
    ({"debug_args": [["--x"]]}, "exports.builds[0].debug_args[0]", "must be a string"),
    ({"debug": "yes"}, "exports.builds[0].debug", "bool"),
    ({"debug_args": None}, "suites.executorch_qnn.localize", "has no `debug_args`"),
])
def test_bad_debug_keys_are_plan_errors_naming_the_key(tmp_path: Path, over, key, words) -> None:
    path = write_exports_plan(tmp_path, builds=[_build(**over)], suites=[LOCALIZE_SUITE])
    with pytest.raises(PlanError) as err:
        load_plan(path)
    msg = str(err.value)
    assert str(path) in msg and f"key {key!r}" in msg and words in msg, msg
    assert for_error(err.value) is ExitCode.USAGE_ERROR


def test_the_stage_lays_the_debug_build_out_where_localize_finds_it_and_caches_it(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    env = fake_env(tmp_path)
    stage, said = run_stage(plan, tmp_path, env=env)
    assert [r.ok for r in stage.results] == [True, True], [r.reason() for r in stage.results]
    assert [r.job.debug for r in stage.results] == [False, True]
    program = tmp_path / "out" / "exports" / "tiny" / "SM8650" / "16a4w"
    assert (program / "model.pte").is_file() and not (program / "debug.pte").exists()
    found = debug_files_for(program)
    assert found.folder == program.parent / "debug" / "16a4w" and not found.missing_build()
    assert (found.folder / "debug.pte").read_text().startswith("sm8650-16a4w-debug")
    assert sorted(runs(tmp_path)) == ["sm8650-16a4w", "sm8650-16a4w-debug"]  # in parallel: either first
    again, said = run_stage(plan, tmp_path, env=env, out="out2")
    assert [r.cache.value for r in again.results] == ["hit", "hit"], said
    assert sorted(runs(tmp_path)) == ["sm8650-16a4w", "sm8650-16a4w-debug"], "a cached debug build is never rebuilt"
    assert not debug_files_for(tmp_path / "out2" / "exports" / "tiny" / "SM8650" / "16a4w").missing_build()


def test_a_debug_build_without_its_files_is_an_invalid_export_naming_them(tmp_path: Path) -> None:
    stage, _ = run_stage(_plan(tmp_path), tmp_path, env=fake_env(tmp_path, "sm8650-16a4w-debug=no-encodings"))
    plain, debug = stage.results
    assert plain.ok and not debug.ok and debug.failure is not None
    assert debug.failure.failure_class == "export-invalid"
    msg = debug.failure.message
    assert "wrote no qnn_encodings.json" in msg and "exports.builds[0].debug_args" in msg, msg
    assert not (tmp_path / "out" / "exports" / "tiny" / "SM8650" / "debug" / "16a4w").exists()


def _cells(ctx):
    """The format's cell and its localization, as the ExecuTorch suite names them."""
    for name in ("test_quant_format_runs[16a4w]", "test_localize[16a4w]"):
        rec = TestRecord(name=name, suite=ctx.entry.suite.name, device=ctx.device.name,
                         backend_pair=BackendPair(Backend.QNN, variant="16a4w"))
        rec.set_verdict(Verdict.passed() if "runs" in name else Verdict.skipped("no debug program here"))
        yield rec


def test_a_failed_debug_build_skips_only_its_formats_localization(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "harness-cache"))
    for k, v in fake_env(tmp_path, "sm8650-16a4w-debug=traceback").items():
        monkeypatch.setenv(k, v)
    inv = load_inventory(write_soc_inventory(tmp_path, ("SM8650",)))
    result = run_night(_plan(tmp_path), inv, tmp_path / "night", _cells, lock_dir=tmp_path / "locks",
                       say=lambda _m: None)
    by = {r.name: r for r in result.records()}
    failed = by["test_export[tiny-sm8650-16a4w-debug]"]
    assert failed.status == "failed" and failed.message.startswith("SM8650 16a4w debug build: "), failed.message
    assert by["test_quant_format_runs[16a4w]"].status == "passed"
    loc = by["test_localize[16a4w]"]
    assert loc.status == "skipped" and loc.message.startswith("export failed: test_export[tiny-sm8650-16a4w-debug] "), \
        loc.message


def test_an_exports_key_holds_only_its_kinds_tools(tmp_path: Path) -> None:
    """A fresh venv without MNN (or a new MNN) rebuilt every ExecuTorch export: only the tools a
    kind builds with are in its key."""
    (job,) = _plan(tmp_path, localize=False).exports.jobs(())
    found = {"qairt": "2.49", "executorch": "1.5.1", "torch": "2.13.0", "mnn": "3.2.0"}
    key = export_cache.export_key(export_cache.key_material(job, "inputs", found))
    assert export_cache.export_key(export_cache.key_material(job, "inputs", {**found, "mnn": None})) == key
    for tool in ("qairt", "executorch", "torch"):
        assert export_cache.export_key(export_cache.key_material(job, "inputs", {**found, tool: "other"})) != key, tool
    (mnn,) = _plan(tmp_path, localize=False, kind="mnn").exports.jobs(())
    mnn_key = export_cache.export_key(export_cache.key_material(mnn, "inputs", found))
    assert export_cache.export_key(export_cache.key_material(mnn, "inputs", {**found, "executorch": None})) == mnn_key
    assert export_cache.export_key(export_cache.key_material(mnn, "inputs", {**found, "mnn": "3.3.0"})) != mnn_key
