"""Helpers the suites share (plain functions; fixtures live in conftest.py)."""

from __future__ import annotations

import warnings
from collections.abc import Collection

import pytest

from harness import pipeline
from harness.checks.agreement import DriftWarning
from harness.outcomes import FailureClass
from harness.provision.types import ProvisionedModel
from harness.report.records import TestRecord

# Which suite fits which export (model_type from llm_config.json; README "Suites").
SUITE_MODEL_TYPES: dict[str, tuple[str, ...]] = {"qwen3": ("qwen3",), "qwen3_vl": ("qwen3_vl",)}


def require_model_type(model: ProvisionedModel, suite: str) -> None:
    """Skip the suite's device tests, with the reason, for an export of another model type."""
    fits = SUITE_MODEL_TYPES[suite]
    if model.model_type in fits:
        return
    other = next((f"suites/{s}" for s, types in SUITE_MODEL_TYPES.items() if model.model_type in types), None)
    where = f"; run {other} for it" if other else ""
    pytest.skip(f"model type is {model.model_type!r} (llm_config.json), not {' or '.join(fits)}: "
                f"suites/{suite} does not fit this export{where}")


def check_generation(rec: TestRecord, run: pipeline.PairRun, j: pipeline.Judgement, *,
                     checked_elsewhere: Collection[FailureClass] = ()) -> None:
    """The (pair, prompt)'s verdict from `pipeline.decide`, the function the lab's records come
    from too, so the suite and the lab agree by construction (`checked_elsewhere`: classes the
    suite reports in tests of their own). Its class, message and figures land in the test's
    record before the test fails; drift that passes is a DriftWarning."""
    outcome = pipeline.record_outcome(rec, run, j, checked_elsewhere=checked_elsewhere)
    if outcome.failed:
        raise AssertionError(f"{j.pair} {j.case.id}: {outcome.failure_class}: {outcome.message}")
    if outcome.warning is not None:
        warnings.warn(DriftWarning(outcome.message, j.agreement))
