"""Issue 33's must-show through a plan's export stage, for real (tests/lab/localize_night.py): the
stage lowers the example decoder healthy and with the seed's MUL-range fault at layer 2 (no other
test plants there), each with its debug build because the suite says `localize: true`; the night
runs the localize check on the emulated SM8650; the faulty export's first departure is layer 2's
SwiGLU MUL, in the records and the JUnit, the healthy one's none; the next night's stage serves
every export, the debug builds too, from the cache."""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from localize_night import FAULT_PLAN, FORMAT, HEALTHY, PLAN_FAULT_LAYER, need_host_qnn, night_plan, planted

from harness.evidence import LocalizeEvidence, Outcome
from harness.inventory import load_inventory
from harness.lab import ExitCode, for_night, plan_job, run_night
from harness.lab.plan import load_plan

# Four real lowerings (~25-30 s each idle, minutes on a loaded host) and two debug runs: the run's
# largest CPU cost (~240 s), so in `make test-heavy`; `make test` keeps localization in the cell
# (tests/suites/test_executorch_localize.py) and pytest's door (test_executorch_localize_door.py).
pytestmark = [pytest.mark.real_qnn, pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory):
    need_host_qnn()
    work = tmp_path_factory.mktemp("localize-night")
    plan_path, devices = night_plan(work)
    result = run_night(load_plan(plan_path), load_inventory(devices), work / "out", plan_job,
                       lock_dir=work / "locks", say=lambda _m: None)
    return result, work


def _localize_record(result, model: str):
    return next(r for r in result.records() if r.model == model and r.name.endswith(f"test_localize[{FORMAT}]"))


def test_the_stage_builds_each_export_and_its_debug_build(night) -> None:
    result, work = night
    exports = {(r.model, r.name): r for r in result.records() if r.suite == "exports"}
    for model in (HEALTHY, FAULT_PLAN):
        for name in (f"test_export[{model}-sm8650-{FORMAT}]", f"test_export[{model}-sm8650-{FORMAT}-debug]"):
            assert exports[(model, name)].status == "passed", exports[(model, name)].message
    debug = work / "out" / "exports" / FAULT_PLAN / "SM8650" / "debug" / FORMAT
    assert (debug / "debug.pte").is_file() and (debug / "qnn_encodings.json").is_file()


def test_the_faulty_exports_first_departure_is_its_layers_mul(night) -> None:
    result, work = night
    rec = _localize_record(result, FAULT_PLAN)
    ev = rec.evidence.get(LocalizeEvidence)
    assert ev is not None, rec.message
    first = ev.result.first
    assert ev.result.outcome is Outcome.DEPARTED and first is not None, ev.result.reason
    assert first.layer == f"layers.{PLAN_FAULT_LAYER}" and "mul" in first.target, (first, rec.message)
    assert first.node == planted(work / "out" / "exports" / FAULT_PLAN / "SM8650" / "debug" / FORMAT)
    assert rec.status == "failed" and rec.failure_class == "disagree" and first.node in rec.message
    props = _junit_properties(work / "out" / "junit.xml", FAULT_PLAN)
    assert props["localize"] == "departed" and props["localize_first_op"] == first.node, props
    assert props["localize_layer"] == f"layers.{PLAN_FAULT_LAYER}"


def test_the_healthy_export_departs_nowhere(night) -> None:
    result, work = night
    rec = _localize_record(result, HEALTHY)
    ev = rec.evidence.get(LocalizeEvidence)
    assert ev is not None, rec.message
    assert ev.result.outcome is Outcome.NONE and ev.result.first is None, ev.result.summary()
    assert rec.status == "passed", rec.message
    assert _junit_properties(work / "out" / "junit.xml", HEALTHY)["localize"] == "none"
    assert for_night(result) is ExitCode.TESTS_FAILED  # the faulty export's localization failed the night


def test_the_next_nights_stage_serves_the_debug_builds_from_the_cache(night) -> None:
    from harness.lab.exports import run_export_stage

    _, work = night
    plan = load_plan(night_plan(work / "again")[0])
    assert plan.exports is not None
    stage = run_export_stage(plan.exports, [], work / "again" / "out", stop=threading.Event(), say=lambda _m: None,
                             run_id="again")
    assert [r.cache.value for r in stage.results] == ["hit"] * 4, [(r.job.id, r.cache.value) for r in stage.results]
    assert sum(r.job.debug for r in stage.results) == 2


def _junit_properties(junit: Path, model: str) -> dict[str, str]:
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.get("name", "").endswith(f"test_localize[{FORMAT}]") and model in case.get("classname", ""):
            return {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    raise AssertionError(f"no test_localize[{FORMAT}] of {model} in {junit}")
