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


def check_export_verdict(rec: TestRecord, matrix: dict[str, pipeline.PairRun],
                         judged: dict[tuple[str, str], pipeline.Judgement], *, suite: str) -> None:
    """The export's verdict over all its prompts, one line per instrument, from
    `pipeline.export_verdict_record`: the function the lab's export record comes from too."""
    cells = pipeline.matrix_records(matrix, list(judged.values()), suite=suite, device=rec.device)
    verdict = pipeline.export_verdict_record(cells, suite=suite, device=rec.device)
    if verdict is None:
        pytest.skip("no backend pair ran: nothing to judge the export by")
    rec.extras["export_verdict"] = verdict.extras["export_verdict"]
    rec.message = verdict.message
    if verdict.status == "failed":
        rec.failure_class = verdict.failure_class
        raise AssertionError(f"the export's verdict: {verdict.failure_class}\n{verdict.message}")
