from pathlib import Path

import pytest
import yaml
from labkit import write_inventory, write_plan

from harness.inventory import load_inventory
from harness.lab.plan import PlanError, load_plan


def test_plan_loads_with_defaults_and_relative_paths(tmp_path):
    plan = load_plan(write_plan(tmp_path, repeats=2))
    assert plan.name == "test-night"
    assert plan.models["tiny"].path == (tmp_path / "exports" / "tiny").resolve()
    assert plan.locks.dir == tmp_path / "locks"
    assert plan.health.min_free_mb == 1 and plan.health.min_battery_pct == 15
    ids = [e.id for e in plan.entries()]
    assert ids == ["matrix/tiny#1", "matrix/tiny#2"]


def test_plan_selects_devices_by_tags_and_names(tmp_path):
    inv = load_inventory(write_inventory(tmp_path, 4))
    assert [d.name for d in load_plan(write_plan(tmp_path, tags=["phone"])).select_devices(inv)] == ["dev0", "dev2"]
    plan = load_plan(write_plan(tmp_path, tags=[], devices=["dev3", "dev1"]))
    assert [d.name for d in plan.select_devices(inv)] == ["dev1", "dev3"]
    with pytest.raises(PlanError, match=r"no device .* matches all of the tags car"):
        load_plan(write_plan(tmp_path, tags=["car"])).select_devices(inv)
    with pytest.raises(PlanError, match=r"key 'devices'.*no device named 'nope'"):
        load_plan(write_plan(tmp_path, devices=["nope"])).select_devices(inv)


@pytest.mark.parametrize("override, key, words", [
    ({"suites": [{"name": "m", "backends": ["npu"]}]}, "suites.m.backends", "not a backend pair"),
    ({"suites": [{"name": "m", "models": ["ghost"]}]}, "suites.m.models", "'ghost' which is not under"),
    ({"suites": [{"name": "m", "timeout": 3}]}, "suites[0].timeout", "not a known key"),
    ({"models": {"tiny": {"path": "missing/dir"}}}, "models.tiny.path", "is not a folder"),
    ({"repeats": "twice"}, "repeats", "must be an integer"),
    ({"repeats": 0}, "repeats", "must be positive"),
    ({"health": {"min_battery": 3}}, "health.min_battery", "not a known key"),
    ({"locks": {"wait_s": True}}, "locks.wait_s", "must be an integer or number"),
    ({"colour": "blue"}, "colour", "not a known key"),
    ({"suites": []}, "suites", "non-empty list"),
])
def test_plan_errors_name_file_and_key(tmp_path, override, key, words):
    path = write_plan(tmp_path, **override)
    with pytest.raises(PlanError) as err:
        load_plan(path)
    msg = str(err.value)
    assert str(path) in msg and f"key {key!r}" in msg and words in msg


def test_plan_file_problems(tmp_path):
    with pytest.raises(PlanError, match="plan file not found"):
        load_plan(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("suites: [\n  - {name: x\n")
    with pytest.raises(PlanError, match=r"not valid YAML at line \d+"):
        load_plan(bad)
    bad.write_text(yaml.safe_dump(["a", "b"]))
    with pytest.raises(PlanError, match="top level must be a mapping"):
        load_plan(bad)


def test_example_plan_is_valid(tmp_path):
    example = Path(__file__).resolve().parents[2] / "examples" / "nightly.yaml"
    (tmp_path / "sdk").mkdir()
    env = {"LAB_EXPORTS": str(tmp_path / "exports"), "LAB_RUNTIMES": str(tmp_path / "rt"),
           "QNN_SDK_ROOT": str(tmp_path / "sdk")}
    plan = load_plan(example, environ=env)
    assert plan.entries() and plan.suites
    assert plan.options["runtime_dir"] == f"{tmp_path}/rt/mnn-{{htp_arch}}"
    with pytest.raises(PlanError, match=r"key 'models.qwen3.path'.*uses \$LAB_EXPORTS, which is not set"):
        load_plan(example, environ={})


@pytest.mark.parametrize("options, key, words", [
    ({"runtime_dir": "runtime", "env": {"BAD-NAME": "1"}}, "options.env", "'BAD-NAME' is not a valid environment"),
    ({"runtime_dir": "runtime", "env": {"1ST": "1"}}, "options.env", "not a valid environment variable"),
    ({"runtime_dir": "runtime", "env": ["A=1"]}, "options.env", "must be a mapping"),
    ({"runtime_dir": "runtime", "env": {"A": {"x": 1}}}, "options.env.A", "must be a string or number"),
    ({"runtime_dir": "no/such/runtime"}, "options.runtime_dir", "is not a folder"),
    ({"runtime_dir": "runtime", "qnn_sdk": "no-sdk"}, "options.qnn_sdk", "is not a folder"),
    ({"runtime_dir": "rt-{arch}"}, "options.runtime_dir", "{arch} is not a device field"),
    ({"runtime_dir": "$NOPE_NOT_SET/rt"}, "options.runtime_dir", "$NOPE_NOT_SET, which is not set"),
    ({"runtime_dir": "runtime", "max_new_tokens": 0}, "options.max_new_tokens", "must be positive"),
    ({}, "options.runtime_dir", "is missing for suite 'matrix'"),
])
def test_job_options_fail_at_load_naming_the_key(tmp_path, options, key, words):
    path = write_plan(tmp_path, options=options)
    with pytest.raises(PlanError) as err:
        load_plan(path)
    assert f"key {key!r}" in str(err.value) and words in str(err.value), str(err.value)


def test_suite_runner_and_per_device_runtime_checked_before_the_night(tmp_path):
    with pytest.raises(PlanError, match=r"key 'suites.m.runner'.*'pytest' has no lab job"):
        load_plan(write_plan(tmp_path, suites=[{"name": "m", "runner": "pytest"}]))
    inv = load_inventory(write_inventory(tmp_path, 2))
    (tmp_path / "rt-v79").mkdir()
    plan = load_plan(write_plan(tmp_path, options={"runtime_dir": "rt-{htp_arch}"}))
    with pytest.raises(PlanError, match=r"key 'options.runtime_dir'.*rt-v75 \(for device dev1\) is not a folder"):
        plan.check_models(plan.select_devices(inv))


def test_model_path_per_soc(tmp_path):
    inv = load_inventory(write_inventory(tmp_path, 2))
    for arch in ("v79", "v75"):
        (tmp_path / "exports" / f"tiny-{arch}").mkdir(parents=True)
    plan = load_plan(write_plan(tmp_path, models={"tiny": {"path": "exports/tiny-{htp_arch}"}}))
    devices = plan.select_devices(inv)
    plan.check_models(devices)
    entry = plan.entries()[0].for_device(inv.get("dev1"))
    assert entry.model.path == tmp_path / "exports" / "tiny-v75"
    (tmp_path / "exports" / "tiny-v75").rmdir()
    with pytest.raises(PlanError, match=r"tiny-v75 \(for device dev1\) is not a folder"):
        plan.check_models(devices)
    with pytest.raises(PlanError, match=r"key 'models.tiny.path': \{arch\} is not a device field"):
        load_plan(write_plan(tmp_path, models={"tiny": {"path": "exports/tiny-{arch}"}}))
