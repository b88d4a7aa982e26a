"""`make demo`'s scenarios as a test, through both front doors. suites/qwen3_vl (pytest) passes
on a good Qwen3-VL export on the virtual OnePlus 13 and fails, for the right reason, on a
scripted garbled QNN answer, a missing deepstack output, a [3,1,1] placeholder, a
chunked-prefill position bug and MLP Mul ranges copied from an operand; then a lab night of
suite qwen3_vl over the same exports gives every scenario the same testcases with the same
status and failure class, check by check (one suite, harness/suite/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.suite import QWEN3_VL
from tools.demo import SCENARIOS, compare_doors, pytest_verdicts, run_both_doors

# Six scenarios through pytest, then one night over them: far beyond the default 300 s per test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo")


@pytest.fixture(scope="module")
def doors(demo_dir: Path):
    return run_both_doors(demo_dir, say=lambda _m: None)


@pytest.fixture(scope="module")
def outcomes(doors):
    return {o.scenario.name: o for o in doors[0]}


@pytest.fixture(scope="module")
def lab_side(doors):
    return doors[1]


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_scenario_behaves_as_expected(outcomes, name: str) -> None:
    outcome = outcomes[name]
    assert outcome.as_expected, "\n".join(outcome.problems)


def test_good_export_passes_every_test(outcomes, demo_dir: Path) -> None:
    good = outcomes["good"]
    assert not good.failed and len(good.passed) >= 16
    # A QNN cell's pass carries where it ran: its stubs' QNN Plugin ops (docs/placement.md).
    recs = [json.loads(line) for line in (demo_dir / "good.records.jsonl").read_text().splitlines()]
    placed = {r["name"].split("::")[-1]: r["extras"]["placement"] for r in recs
              if r["name"].endswith(("test_generation[qnn/qnn-france]", "test_generation[cpu/cpu-france]"))
              and "placement" in r["extras"]}
    assert list(placed) == ["test_generation[qnn/qnn-france]"], placed  # the CPU pair has none
    assert placed["test_generation[qnn/qnn-france]"]["program"] == "qnn/llm.mnn, qnn/visual.mnn"
    assert "QNN x" in placed["test_generation[qnn/qnn-france]"]["summary"]
    prov = next(r["extras"]["provenance"] for r in recs if r["name"].endswith("test_generation[qnn/qnn-france]"))
    assert prov["program_sha256"] and prov["binaries_sha256"], prov  # the stub's and its qnn/*.bin's


def test_broken_exports_fail_only_where_expected(outcomes) -> None:
    # The garbled answer is scripted for one prompt on one pair: nothing else may fail.
    assert sorted(outcomes["garbled-qnn"].failed) == ["test_generation[qnn/qnn-cat]"]
    assert sorted(outcomes["position-bug"].failed) == ["test_mrope_positions[qnn/qnn]"]
    message = outcomes["position-bug"].failed["test_mrope_positions[qnn/qnn]"]
    assert "prefill chunk 1" in message and "chunk_local_bug" in message


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_both_doors_agree_check_by_check(demo_dir: Path, outcomes, lab_side, name: str) -> None:
    pytest_side = pytest_verdicts(demo_dir, name)
    # Every check of the suite is there, in both doors, with every one of its testcases.
    assert {n.split("[")[0] for n in pytest_side} == {c.test_name for c in QWEN3_VL.checks}
    assert not compare_doors(pytest_side, lab_side[name]), "\n".join(compare_doors(pytest_side, lab_side[name]))
    # The comparison is not vacuous: what pytest failed, the night failed with the same class.
    failed = {n for n, (status, _cls) in pytest_side.items() if status == "failed"}
    assert failed == set(outcomes[name].failed)
    assert failed == {n for n, (status, _cls) in lab_side[name].items() if status == "failed"}
