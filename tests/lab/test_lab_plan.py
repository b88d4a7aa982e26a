from pathlib import Path

import pytest
import yaml

from harness.lab.plan import PlanError, load_plan

from labkit import write_inventory, write_plan
from harness.inventory import load_inventory


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
    ({"repeats": "twice"}, "repeats", "must be a integer"),
    ({"repeats": 0}, "repeats", "must be positive"),
    ({"health": {"min_battery": 3}}, "health.min_battery", "not a known key"),
    ({"locks": {"wait_s": True}}, "locks.wait_s", "must be a integer or number"),
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
    data = yaml.safe_load(example.read_text())
    # The example points at the shared model folder; validate it against a stand-in folder.
    for spec in data["models"].values():
        (tmp_path / "m").mkdir(exist_ok=True)
        spec["path"] = str(tmp_path / "m")
    path = tmp_path / "nightly.yaml"
    path.write_text(yaml.safe_dump(data))
    plan = load_plan(path)
    assert plan.entries() and plan.suites


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
