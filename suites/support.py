"""Helpers the suites share (plain functions; fixtures live in conftest.py)."""

from __future__ import annotations

from harness import pipeline
from harness.provision.types import ProvisionedModel
from harness.report.records import TestRecord


def select_pairs(model: ProvisionedModel, wanted: list[str] | None) -> list[str]:
    pairs = [p for p in model.configs if wanted is None or p in wanted]
    pairs.sort(key=lambda p: p not in pipeline.CPU_REFERENCE_PAIRS)  # the CPU reference first
    return pairs


def record_run(rec: TestRecord, run: pipeline.PairRun, index: int) -> None:
    """Copy a run's perf figures into the test's record (JUnit properties)."""
    proc = run.result.runs[index]
    rec.backend_pair = run.pair
    if proc.parsed.summary is not None:
        rec.prefill_tps = pipeline.finite(proc.parsed.summary.get("prefill_speed_tok_s"))
        rec.decode_tps = pipeline.finite(proc.parsed.summary.get("decode_speed_tok_s"))
