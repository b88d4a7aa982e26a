"""The suites' checks that need no device, in the night: run once per export (whatever the
number of devices, suites and repeats), before any claim; a failing one fails the export's
testcase on every device it would run on and says so. Plans select checks by name or group."""

from __future__ import annotations

from pathlib import Path

import pytest
from labkit import write_inventory, write_plan

from harness.checks.quant import export as quant_export
from harness.evidence import QuantFinding
from harness.inventory import load_inventory
from harness.lab import export_check_records
from harness.lab.plan import PlanError, load_plan
from harness.suite import Scope


def _plan(tmp_path: Path, scenario: str, **overrides):
    from virtual_lab.exports import make_qwen3_vl_export

    make_qwen3_vl_export(tmp_path / "exports" / "vl", size_mb=0.5, scenario=scenario)
    overrides.setdefault("suites", [{"name": "qwen3_vl", "models": ["vl"]}])
    return load_plan(write_plan(tmp_path, models={"vl": {"path": "exports/vl"}}, **overrides))


def test_a_failing_export_check_runs_once_and_fails_the_export_on_every_device(tmp_path: Path, monkeypatch) -> None:
    plan = _plan(tmp_path, "activation_saturation", repeats=2)
    devices = list(load_inventory(write_inventory(tmp_path, 3)).devices.values())
    calls: list[Path] = []
    real = quant_export.check_export_quant
    def counted(p: Path) -> quant_export.ExportQuant:
        calls.append(p)
        return real(p)

    monkeypatch.setattr("harness.suite.checks.check_export_quant", counted)
    recs = export_check_records(plan, devices, run_id="r1")
    assert len(calls) == 1  # one export: checked once for 3 devices x 2 repeats
    quant = [r for r in recs if r.name.startswith("test_quant_metadata")]
    assert sorted((r.device, r.name) for r in quant) == sorted(
        (d.name, f"test_quant_metadata#{n}") for d in devices for n in (1, 2))
    for r in quant:
        assert r.status == "failed" and r.failure_class == "quant-metadata"
        assert "inherited from an operand in 28 of 28 blocks (blocks 0-27)" in r.message and "fix:" in r.message
        assert "fails this export on every device it would run on (3)" in r.message
        assert not any(d.name in r.message for d in devices), "no device listed in another's record"
        assert r.run_id == "r1" and r.suite == "qwen3_vl" and r.model == "vl (qwen3_vl)"
        first = r.evidence.get(QuantFinding)  # the MNN lane's "where it departs": the first wrong range
        assert first is not None and (first.kind, first.layer, first.errors) == ("mlp_mul_inherited", 0, 28)
        assert first.tensor and first.tensor in first.message
    shapes = [r for r in recs if r.name.startswith("test_export_shapes")]
    assert len(shapes) == 6 and all(r.status == "passed" for r in shapes)


def test_healthy_export_passes_and_an_export_without_act_quant_is_skipped_with_the_reason(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "healthy")
    devices = list(load_inventory(write_inventory(tmp_path, 1)).devices.values())
    recs = {r.name: r for r in export_check_records(plan, devices, run_id="r")}
    assert recs["test_quant_metadata"].status == "passed", recs["test_quant_metadata"].message
    args = tmp_path / "exports" / "vl" / "export_args.json"
    args.write_text(args.read_text().replace('"smooth": true', '"smooth": false'))
    recs = {r.name: r for r in export_check_records(plan, devices, run_id="r")}
    assert recs["test_quant_metadata"].status == "skipped"
    assert "exported without --smooth/--omni" in recs["test_quant_metadata"].message


def test_a_plan_selects_checks_by_name_or_group(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "healthy", suites=[{"name": "qwen3_vl", "models": ["vl"], "checks": ["structural"]}])
    suite = plan.suites[0].suite
    assert [c.name for c in suite.checks] == ["export_shapes", "runtime_shape_guards", "mrope_positions",
                                              "mrope_positions_chunked", "mrope_positions_image_split",
                                              "runtime_shape_guards_chunked", "chunked_prefill_equivalence"]
    assert {c.scope for c in suite.checks} == {Scope.EXPORT, Scope.PAIR, Scope.DEVICE}
    static = _plan(tmp_path, "healthy", suites=[{"name": "qwen3_vl", "models": ["vl"], "checks": ["static"]}])
    assert [c.name for c in static.suites[0].suite.checks] == ["export_shapes", "quant_metadata"]
    with pytest.raises(PlanError, match=r"key 'suites.qwen3_vl.checks'.*'mrope' is not a check of suite"):
        _plan(tmp_path, "healthy", suites=[{"name": "qwen3_vl", "models": ["vl"], "checks": ["mrope"]}])
