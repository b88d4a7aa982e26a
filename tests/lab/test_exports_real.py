"""The example's exporter for real, once for this module: examples/et_qnn/lower_decoder.py
lowered with the host QNN for SA8295 (v68) at 16a4w and 8a8w in one night over an emulated
SA8295. QNN refuses 16a4w (its op names, v68 against v73, in the testcase's class and message);
8a8w builds and the ExecuTorch suite's testcase of it runs and passes on the emulator; the 16a4w
testcase is skipped "export failed: ..."; the night exits 1. Skips without the `qnn` extra."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from harness.evidence import ExportBuild
from harness.inventory import load_inventory
from harness.lab import ExitCode, for_night, run_night
from harness.lab.plan import load_plan
from tests.lab.localize_night import need_host_qnn

pytestmark = pytest.mark.slow  # tens of seconds: tests/conftest.py starts slow files early

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "et_qnn"


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    need_host_qnn()
    work = tmp_path_factory.mktemp("et-qnn-night")
    mp = pytest.MonkeyPatch()
    mp.setenv("HARNESS_CACHE_DIR", str(work / "harness-cache"))
    for script in ("lower_decoder.py", "debug_program.py", "plant_fault.py"):  # the plan's inputs
        shutil.copy(EXAMPLE / script, work / script)
    plan = yaml.safe_load((EXAMPLE / "nightly.yaml").read_text())
    plan["devices"] = ["emu-sa8295"]
    plan["exports"]["builds"][0]["targets"] = ["SA8295"]
    plan["exports"]["parallel"] = 2
    (work / "nightly.yaml").write_text(yaml.safe_dump(plan))
    devices = yaml.safe_load((EXAMPLE / "devices.yaml").read_text())
    for d in devices["devices"]:
        d["work_dir"] = str(work / "devices" / d["name"])
    (work / "devices.yaml").write_text(yaml.safe_dump(devices))
    try:
        result = run_night(load_plan(work / "nightly.yaml"), load_inventory(work / "devices.yaml"), work / "out",
                           _plan_job(), lock_dir=work / "locks", say=lambda _m: None)
        yield result
    finally:
        mp.undo()


def _plan_job():
    from harness.lab import plan_job

    return plan_job


def test_sa8295_16a4w_fails_with_qnn_op_names_and_arches(night):
    rec = next(r for r in night.records() if r.name == "test_export[tiny-decoder-sa8295-16a4w]")
    assert rec.status == "failed" and rec.failure_class.startswith("qnn-"), (rec.failure_class, rec.message)
    assert "layer_norm" in rec.message and "v68" in rec.message and "v73" in rec.message, rec.message
    assert rec.evidence.get(ExportBuild).facts, "the QNN facts (ops, arch, needed arch) are recorded"


def test_sa8295_8a8w_builds_and_its_suite_testcase_passes_on_the_emulator(night):
    recs = night.records()
    built = next(r for r in recs if r.name == "test_export[tiny-decoder-sa8295-8a8w]")
    assert built.status == "passed", built.message
    ran = next(r for r in recs if r.device == "emu-sa8295" and r.name == "test_quant_format_runs[8a8w]")
    assert ran.status == "passed", ran.message
    skipped = next(r for r in recs if r.device == "emu-sa8295" and r.name == "test_quant_format_runs[16a4w]")
    assert skipped.status == "skipped" and skipped.message.startswith("export failed: test_export[tiny-decoder-sa8295-16a4w] qnn-")


def test_the_night_exits_1(night):
    assert for_night(night) is ExitCode.TESTS_FAILED
