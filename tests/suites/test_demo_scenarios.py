"""`make demo`'s scenarios as a test: suites/qwen3_vl passes on a good Qwen3-VL export on the
virtual OnePlus 13 and fails, for the right reason, on a scripted garbled QNN answer, a missing
deepstack output, a [3,1,1] placeholder and a chunked-prefill position bug."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.demo import SCENARIOS, run_scenarios


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return {o.scenario.name: o for o in run_scenarios(tmp_path_factory.mktemp("demo"), say=lambda _m: None)}


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_scenario_behaves_as_expected(outcomes, name: str) -> None:  # type: ignore[no-untyped-def]
    outcome = outcomes[name]
    assert outcome.as_expected, "\n".join(outcome.problems)


def test_good_export_passes_every_test(outcomes) -> None:  # type: ignore[no-untyped-def]
    good = outcomes["good"]
    assert not good.failed and len(good.passed) >= 16


def test_broken_exports_fail_only_where_expected(outcomes) -> None:  # type: ignore[no-untyped-def]
    # The garbled answer is scripted for one prompt on one pair: nothing else may fail.
    assert sorted(outcomes["garbled-qnn"].failed) == ["test_generation[qnn/qnn-cat]"]
    assert sorted(outcomes["position-bug"].failed) == ["test_mrope_positions[qnn/qnn]"]
    message = outcomes["position-bug"].failed["test_mrope_positions[qnn/qnn]"]
    assert "prefill chunk 1" in message and "chunk_local_bug" in message
