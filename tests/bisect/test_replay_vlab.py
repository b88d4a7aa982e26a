"""A night on a virtual lab of two OnePlus 13 (SM8750) writes a repro bundle for its failed cell; the
bundle replayed on the other phone reproduces the crash; a bundle whose program changed is refused
naming the file (exit 4)."""

from __future__ import annotations

import json

import pytest
import yaml

from harness.bisect import night_hook
from harness.cli import main
from harness.lab import jobs, run_night
from harness.lab.plan import load_plan

pytestmark = pytest.mark.slow
CELL = "test_generation[qnn-france]"


def test_bundle_replays_on_another_phone_and_refuses_a_changed_program(vlab_factory, tmp_path, capsys, monkeypatch):
    from virtual_lab.exports import default_behaviour, make_qwen3_export
    from virtual_lab.lab import LabDeviceConfig

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    lab = vlab_factory(devices=[LabDeviceConfig("op13-a", tags=("night",)), LabDeviceConfig("op13-b")])
    behaviour = default_behaviour(False)
    behaviour["prompts"].setdefault("", {}).setdefault("cpu/qnn", {})["fault"] = "crash"
    export = tmp_path / "export"
    make_qwen3_export(export, soc_id=69, dsp_arch="v79", vtcm_mb=8, size_mb=1, behaviour=behaviour,
                      qnn_binaries="stand-in")
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump({
        "name": "bundle-night", "devices": ["op13-a"], "models": {"qwen3": {"path": str(export)}},
        "suites": [{"name": "qwen3", "runner": "llm_demo", "models": ["qwen3"], "backends": ["qnn"],
                    "checks": ["generation"]}],
        "options": {"runtime_dir": str(lab.runtime_dir("v79")), "qnn_sdk": str(lab.qnn_sdk_dir),
                    "max_new_tokens": 16, "timeout_s": 120}}))
    night = run_night(load_plan(plan_path), lab.inventory, tmp_path / "night", jobs.suite_job,
                      after=night_hook(lab.inventory))
    crash = next(r for r in night.records() if r.name == CELL)
    assert crash.status == "failed" and crash.failure_class == "crash"
    failed = sorted(r.name for r in night.records() if r.is_bad)
    bundles = sorted((tmp_path / "night" / "bundles" / "op13-a").iterdir())
    assert len(bundles) == len(failed) >= 1, "one bundle per failed cell, none for a passing one"
    bundle = tmp_path / "night" / "bundles" / "op13-a" / "test_generation_qnn-france"
    data = json.loads((bundle / "bundle.json").read_text())
    assert data["verdict"]["failure_class"] == "crash" and data["device"]["soc_model"] == "SM8750"
    assert data["device_command"]["argv"][0].endswith("llm_demo") and "LD_LIBRARY_PATH" in data["device_command"]["env"]
    sets = {f["set"] for f in data["files"]}
    assert sets == {"model", "runtime"} and all(len(f["sha256"]) == 64 for f in data["files"])
    assert not (bundle / "files").exists(), "small by default: hashes, not the files"

    devices = str(lab.devices_yaml)
    code = main(["--file", devices, "replay", str(bundle), "--device", "op13-b", "--out", str(tmp_path / "r1")])
    out = capsys.readouterr().out
    assert code == 0 and "replay on op13-b: reproduced: failed crash" in out, out

    program = next(f for f in data["files"] if f["set"] == "model" and f["rel"].endswith(".mnn"))
    with open(program["host"], "ab") as fh:
        fh.write(b"\0")
    code = main(["--file", devices, "replay", str(bundle), "--device", "op13-b", "--out", str(tmp_path / "r2")])
    err = capsys.readouterr().err
    assert code == 4 and program["host"] in err and "changed: sha256" in err, err
