"""Helpers the suites share (plain functions; fixtures live in conftest.py)."""

from __future__ import annotations

import pytest

from harness import pipeline
from harness.inventory import DeviceSpec
from harness.pairs import cpu_first, uses_qnn
from harness.provision.types import ProvisionedModel, ProvisionedRuntime
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


def pair_skip_reason(pair: str, model: ProvisionedModel, wanted: list[str] | None,
                     device: DeviceSpec | None = None, runtime: ProvisionedRuntime | None = None) -> str | None:
    """Why a backend pair does not run in this session (None: it runs)."""
    if wanted is not None and pair not in wanted:
        return f"backend {pair} not selected (--backends {','.join(wanted)})"
    if pair not in model.configs:
        return f"backend {pair} has no config in this export (have: {', '.join(model.configs) or 'none'})"
    if uses_qnn(pair):
        if device is not None and not device.has_htp:
            return f"backend {pair} needs a QNN/HTP device; {device.name} is the host (soc: host)"
        if runtime is not None and not runtime.qnn:
            return f"backend {pair}: the runtime was pushed without QNN libraries (pass --qnn-sdk)"
    return None


def select_pairs(model: ProvisionedModel, wanted: list[str] | None, device: DeviceSpec | None = None,
                 runtime: ProvisionedRuntime | None = None) -> list[str]:
    return cpu_first(p for p in model.configs if pair_skip_reason(p, model, wanted, device, runtime) is None)


def record_run(rec: TestRecord, run: pipeline.PairRun, index: int) -> None:
    """Copy a run's figures into the test's record (JUnit properties): perf, the class of the
    runner's result, and the text with its coherence verdict, before any assertion."""
    proc = run.result.runs[index]
    rec.backend_pair = run.pair
    if proc.parsed.summary is not None:
        rec.prefill_tps = pipeline.finite(proc.parsed.summary.get("prefill_speed_tok_s"))
        rec.decode_tps = pipeline.finite(proc.parsed.summary.get("decode_speed_tok_s"))
    cls = proc.classification
    if not cls.ok:
        rec.failure_class = cls.cls
        rec.signature = cls.signature_ids[0] if cls.signature_ids else ""
        rec.message = cls.reason


def record_judgement(rec: TestRecord, j: pipeline.Judgement) -> None:
    rec.text = j.text or ""
    if j.verdict is not None:
        rec.verdict = j.verdict.verdict
        if not j.verdict.coherent and not rec.failure_class:
            rec.failure_class = "garbled"
            rec.message = "; ".join(j.verdict.reasons)
