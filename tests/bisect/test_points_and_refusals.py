"""Cheap checks of the parts around the runs: good/bad points from the history's testcase rows, a
bundle refused for a changed or missing file and for another SoC (exit 4, naming them), a plan's
`bisect:` checked at load."""

from __future__ import annotations

import json

import pytest

from harness.bisect import AxisKind, points_from_history, record_night
from harness.cli import main
from harness.lab.plan import PlanError, parse_plan
from harness.outcomes import FailureClass, Status
from harness.report import TestRecord
from harness.verdict import Verdict


def _rec(status: Status, cls: FailureClass | None = None) -> TestRecord:
    rec = TestRecord(name="test_generation[qnn-france]", suite="qwen3", device="op13")
    rec.set_verdict(Verdict(status, cls, ""))
    return rec


def test_points_are_the_last_pass_and_the_first_failure_after_it(tmp_path):
    db = tmp_path / "history.sqlite"
    nights = [("n1", Status.PASSED, None, "aaa"), ("n2", Status.FAILED, FailureClass.CRASH, "bbb"),
              ("n3", Status.PASSED, None, "ccc"), ("n4", Status.FAILED, FailureClass.CRASH, "ddd"),
              ("n5", Status.FAILED, FailureClass.CRASH, "eee")]
    for i, (night, status, cls, commit) in enumerate(nights):
        record_night(db, night, float(i), [_rec(status, cls)], {("inputs", "tiny"): commit, ("runtime", "tiny"): "/rt"})
    p = points_from_history(db, "op13", "test_generation[qnn-france]", AxisKind.INPUTS)
    assert (p.good, p.bad, p.good_night, p.bad_night, p.failure_class) == ("ccc", "ddd", "n3", "n4", "crash")
    with pytest.raises(Exception, match="no night where"):
        points_from_history(db, "other", "test_generation[qnn-france]", AxisKind.INPUTS)
    with pytest.raises(Exception, match="recorded no qairt version"):
        points_from_history(db, "op13", "test_generation[qnn-france]", AxisKind.QAIRT)


def _bundle(tmp_path, soc="SM8750"):
    program = tmp_path / "export" / "llm.mnn"
    program.parent.mkdir()
    program.write_bytes(b"program")
    from harness.provision import sha256_file

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "bundle.json").write_text(json.dumps({
        "format": "harness-bundle/1", "device": {"name": "op13-a", "soc_model": soc},
        "files": [{"set": "model", "rel": "llm.mnn", "host": str(program), "device": "/d/llm.mnn",
                   "sha256": sha256_file(program), "size": 7}],
        "cell": {}, "verdict": {"status": "failed", "failure_class": "crash"}}))
    devices = tmp_path / "devices.yaml"
    devices.write_text(json.dumps({"devices": [{"name": "host", "transport": "local", "work_dir": str(tmp_path)}]}))
    return bundle, program, devices


def test_a_changed_program_refuses_the_replay_naming_it(tmp_path, capsys):
    bundle, program, devices = _bundle(tmp_path)
    program.write_bytes(b"programX")
    assert main(["--file", str(devices), "replay", str(bundle), "--out", str(tmp_path / "o")]) == 4
    err = capsys.readouterr().err
    assert f"{program} (model file llm.mnn) changed: sha256" in err
    program.unlink()
    assert main(["--file", str(devices), "replay", str(bundle), "--out", str(tmp_path / "o")]) == 4
    assert f"{program} (model file llm.mnn) is missing" in capsys.readouterr().err


def test_another_soc_is_refused(tmp_path, capsys):
    bundle, _, devices = _bundle(tmp_path)
    assert main(["--file", str(devices), "replay", str(bundle), "--device", "host", "--out", str(tmp_path / "o")]) == 4
    assert "replay on a device of the same SoC" in capsys.readouterr().err
    (bundle / "bundle.json").write_text("{}")
    assert main(["--file", str(devices), "replay", str(bundle), "--out", str(tmp_path / "o")]) == 4
    assert "not a harness-bundle/1 bundle" in capsys.readouterr().err


def test_a_plans_bisect_section_is_checked_at_load(tmp_path):
    base = {"models": {"m": {"path": str(tmp_path)}}, "suites": [{"name": "qwen3", "models": ["m"]}],
            "options": {"runtime_dir": str(tmp_path)}}
    plan = parse_plan({**base, "bisect": {"axis": "inputs", "budget_s": 60, "device": "spare"}}, tmp_path / "p.yaml")
    assert plan.bisect is not None and plan.bisect.budget_s == 60 and plan.bisect.device == "spare"
    with pytest.raises(PlanError, match="'bisect.axis': 'abi' is not an axis"):
        parse_plan({**base, "bisect": {"axis": "abi"}}, tmp_path / "p.yaml")
    with pytest.raises(PlanError, match="needs at least two folders"):
        parse_plan({**base, "bisect": {"axis": "runtime", "versions": [str(tmp_path)]}}, tmp_path / "p.yaml")
    with pytest.raises(PlanError, match="bisect.when.: is not a known key"):
        parse_plan({**base, "bisect": {"axis": "inputs", "when": "always"}}, tmp_path / "p.yaml")
