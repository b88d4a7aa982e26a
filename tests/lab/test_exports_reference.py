"""A build's `reference:` (docs/exports.md#float-references): the harness builds the float reference
itself from what the export was built from (checkpoint, params, tokenizer) with ExecuTorch's own
llama model, as an export of its own (test_export[<model>-reference]), once per build, cached on those
files, and lays it beside the format folders where the float-reference check finds it. The
programs here are the fake exporter's; the reference is real, on a tiny GGUF's checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from exportkit import FAKE_ARGV, fake_env, run_stage, write_exports_plan

from harness.checks import read_float_reference
from harness.evidence import CacheUse
from harness.lab.exports import cache as export_cache
from harness.lab.plan import PlanError, load_plan

pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'harness[gguf]'")
pytest.importorskip("executorch", reason="the executorch extra is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "etllama"))
import tinygguf  # noqa: E402


def _checkpoint(tmp_path: Path) -> Path:
    from harness.etllama.gguf_checkpoint import convert

    tinygguf.write(tmp_path / "tiny.gguf")
    return convert(tmp_path / "tiny.gguf", tmp_path / "ck").folder


def _plan(tmp_path: Path, ck: Path, **reference: str):
    ref = {"checkpoint": str(ck / "checkpoint.pth"), "params": str(ck / "params.json"),
           "tokenizer": str(ck / "tokenizer.json"), **reference}
    build = {"model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650", "SA8295"], "formats": ["16a4w", "8a8w"],
             "reference": {k: v for k, v in ref.items() if v}}
    return load_plan(write_exports_plan(tmp_path, builds=[build]))


def test_the_reference_is_one_export_per_build_keyed_on_its_files(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path)
    spec = _plan(tmp_path, ck).exports
    assert spec is not None
    jobs = spec.jobs(())
    assert [j.testcase for j in jobs] == ["test_export[tiny-reference]", "test_export[tiny-sm8650-16a4w]",
                                          "test_export[tiny-sm8650-8a8w]", "test_export[tiny-sa8295-16a4w]",
                                          "test_export[tiny-sa8295-8a8w]"]
    argv = jobs[0].argv(tmp_path / "o")
    assert argv[1:3] == ["-m", "harness.etllama.reference"] and argv[-2:] == ["--out", str(tmp_path / "o")]
    material = export_cache.key_material(jobs[0], "files", {"executorch": "1.5.1"})
    assert "target" not in material and "format" not in material and "command" not in material
    assert [j.testcase for j in spec.jobs((), only_format="8a8w")][0] == "test_export[tiny-sm8650-8a8w]"


def test_a_reference_naming_a_missing_file_or_an_unknown_key_is_a_plan_error(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path)
    with pytest.raises(PlanError, match=r"exports\.builds\[0\]\.reference\.params.*is not a file"):
        _plan(tmp_path, ck, params=str(ck / "nope.json"))
    with pytest.raises(PlanError, match=r"exports\.builds\[0\]\.reference\.checkpoint"):
        _plan(tmp_path, ck, checkpoint="")
    with pytest.raises(PlanError, match=r"exports\.builds\[0\]\.reference.*model"):
        _plan(tmp_path, ck, model="llama")


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.timeout(1200)  # two ExecuTorch imports (the reference builder, the fake exporter's programs)
def test_the_stage_builds_the_reference_and_lays_it_beside_the_programs(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path)
    plan = _plan(tmp_path, ck)
    stage, said = run_stage(plan, tmp_path, env=fake_env(tmp_path), only_target="SM8650")
    ref = next(r for r in stage.results if r.job.reference)
    assert ref.ok, (ref.failure, ref.log_tail)
    soc = tmp_path / "out" / "exports" / "tiny" / "SM8650"
    assert (soc / "reference").is_symlink() and (soc / "reference" / "reference.json").is_file()
    found = read_float_reference(soc / "16a4w")  # the format folder's check finds it beside
    assert found is not None and found.folder == soc / "reference" and len(found.prompts) == 3
    assert all(len(p.tokens) == p.prompt_tokens + 16 for p in found.prompts)
    assert "test_export[tiny-reference]" in {r.name for r in stage.records}
    assert any(s.startswith("export tiny reference: passed") for s in said)
    again, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path), only_target="SM8650", out="out2")
    assert next(r for r in again.results if r.job.reference).cache is CacheUse.HIT
