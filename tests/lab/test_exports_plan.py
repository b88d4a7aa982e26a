"""A plan's `exports:` validated at load: exit 4 naming the key (tests/lab/exportkit.py)."""

from __future__ import annotations

import pytest
from exportkit import FAKE_ARGV, write_exports_plan

from harness.lab import ExitCode, for_error
from harness.lab.plan import PlanError, Target, default_parallel, load_plan


def _build(**over):
    b = {"model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650"], "formats": ["16a4w"]}
    b.update(over)
    return b


def test_exports_define_the_models_the_suites_use(tmp_path):
    plan = load_plan(write_exports_plan(tmp_path))
    assert plan.exports is not None and plan.exports.models == ("tiny",)
    assert plan.models["tiny"].kind == "executorch" and plan.models["tiny"].per_device
    jobs = plan.exports.jobs(())
    assert [j.testcase for j in jobs] == ["test_export[tiny-sm8650-16a4w]", "test_export[tiny-sm8650-8a8w]",
                                          "test_export[tiny-sa8295-16a4w]", "test_export[tiny-sa8295-8a8w]"]
    argv = jobs[2].build.argv(jobs[2].target, "16a4w", tmp_path / "o")
    assert "39" in argv and "v68" in argv and str(tmp_path / "o") in argv
    assert plan.exports.builds[0].inputs == ((tmp_path / "recipe.txt").resolve(),)


def test_lab_targets_come_from_the_devices(tmp_path):
    plan = load_plan(write_exports_plan(tmp_path, builds=[_build(targets="lab")]))
    assert [j.id for j in plan.exports.jobs(("SM8750", "SA8295"))] == ["sm8750-16a4w", "sa8295-16a4w"]


@pytest.mark.parametrize("over, key, words", [
    ({"command": ["python", "x.py", "--out", "{out}", "--chip", "{chip}"]}, "exports.builds[0].command[5]",
     "{chip} is not a placeholder"),
    ({"command": ["python", "x.py"]}, "exports.builds[0].command", "never names {out}"),
    ({"command": "python x.py --out {out}"}, "exports.builds[0].command", "without a shell"),
    ({"command": "python x.py --out '{out}'", "shell": True}, "exports.builds[0].command", "inside quotes"),
    ({"command": ["python", "{out"]}, "exports.builds[0].command[1]", "broken braces"),
    ({"command": ["x.py", "--out", "{out}", "--id", "{soc:x}"]}, "exports.builds[0].command[4]",
     "{soc:x} has a format spec"),
    ({"command": ["x.py", "--out", "{out}", "{soc!z}"]}, "exports.builds[0].command[3]", "{soc!z} has a conversion"),
    ({"command": "x.py --out {out} {soc:>10000000000}", "shell": True}, "exports.builds[0].command",
     "{soc:>10000000000} has a format spec"),
    ({"targets": ["SM9999"]}, "exports.builds[0].targets", "'SM9999' is not a SoC"),
    ({"targets": []}, "exports.builds[0].targets", "is empty"),
    ({"inputs": ["missing/recipe.json"]}, "exports.builds[0].inputs[0]", "does not exist"),
    ({"formats": ["16 a4w"]}, "exports.builds[0].formats", "must list names"),
    ({"timeout_s": 0}, "exports.builds[0].timeout_s", "must be positive"),
    ({"env": {"1BAD": "x"}}, "exports.builds[0].env", "not a valid environment variable name"),
    ({"colour": "red"}, "exports.builds[0].colour", "not a known key"),
    ({"kind": "onnx"}, "exports.builds[0].kind", "not a model kind"),
])
def test_bad_exports_are_plan_errors_naming_the_key(tmp_path, over, key, words):
    path = write_exports_plan(tmp_path, builds=[_build(**over)])
    with pytest.raises(PlanError) as err:
        load_plan(path)
    msg = str(err.value)
    assert str(path) in msg and f"key {key!r}" in msg and words in msg, msg
    assert for_error(err.value) is ExitCode.USAGE_ERROR


def test_section_errors(tmp_path):
    with pytest.raises(PlanError, match=r"key 'exports.parallel'.*must be 1 or more"):
        load_plan(write_exports_plan(tmp_path, builds=[_build()], parallel=0))
    with pytest.raises(PlanError, match=r"key 'exports.cache.max_mb'.*not a known key"):
        load_plan(write_exports_plan(tmp_path, builds=[_build()], cache={"max_mb": 3}))
    with pytest.raises(PlanError, match=r"key 'exports.builds\[1\].model'.*already defined"):
        load_plan(write_exports_plan(tmp_path, builds=[_build(), _build()]))


def test_shell_commands_quote_every_value(tmp_path):
    plan = load_plan(write_exports_plan(tmp_path, builds=[_build(command="echo {soc} > {out}/x", shell=True)]))
    job = plan.exports.jobs(())[0]
    argv = job.build.argv(job.target, "16a4w", tmp_path / "a b; rm -rf x")
    assert argv[:2] == ["/bin/sh", "-c"]
    assert argv[2] == f"echo SM8650 > '{tmp_path}/a b; rm -rf x'/x"


def test_default_parallel_from_cores_and_memory():
    assert default_parallel(8, 64 << 30) == 8
    assert default_parallel(8, 9 << 30) == 2
    assert default_parallel(2, 1 << 30) == 1
    assert Target.of("sa8295p") == Target("SA8295", 39, "v68")


def test_the_example_plans_inputs_name_every_file_its_exporter_imports_from_beside_it():
    import re
    from pathlib import Path

    import yaml

    folder = Path(__file__).resolve().parents[2] / "examples" / "et_qnn"
    build = yaml.safe_load((folder / "nightly.yaml").read_text())["exports"]["builds"][0]
    exporter = folder / build["command"][1]
    beside = {m for m in re.findall(r"^\s*(?:from|import) (\w+)", exporter.read_text(), re.MULTILINE)
              if (folder / f"{m}.py").is_file()}
    assert beside and {f"{m}.py" for m in beside} | {exporter.name} <= set(build["inputs"]), \
        "an edit to an imported file must rebuild the export, not serve a stale one"
