"""A matrix cell's record as both doors make it: `harness.suite.run_check` with the generation
check on a MatrixInput (lab/jobs.py's `_matrix_records`, suites/support.py's test_generation),
the testcase named by `Check.testcase` (`test_generation[qnn-france]`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness import pipeline
from harness.pairs import BackendPair
from harness.provision import ProvisionedModel
from harness.report import TestRecord
from harness.suite import GENERATION, MATRIX, Instance, MatrixInput, Suite, run_check

MODEL = ProvisionedModel(device="d", remote_dir="/models/m", kind="mnn", model_type="qwen3_vl", visual=True)


def cell_record(runs: Mapping[BackendPair, pipeline.PairRun], j: pipeline.Judgement, *, suite: Suite = MATRIX,
                provisioned: ProvisionedModel = MODEL, **fields: Any) -> TestRecord:
    """The record of the (pair, prompt) cell `j`, decided as the doors decide it."""
    inst = Instance(j.pair, j.case.id)
    rec = TestRecord(name=GENERATION.testcase(inst), suite=suite.name, **fields)
    run_check(suite, GENERATION, inst, MatrixInput(provisioned, runs, {(j.pair, j.case.id): j}, lambda _p: None), rec)
    return rec


def cell_records(runs: Mapping[BackendPair, pipeline.PairRun], judged: Iterable[pipeline.Judgement], *,
                 suite: Suite = MATRIX, provisioned: ProvisionedModel = MODEL,
                 **fields: Any) -> dict[tuple[BackendPair, str], TestRecord]:
    """Every judged cell's record, by (pair, prompt id)."""
    return {(j.pair, j.case.id): cell_record(runs, j, suite=suite, provisioned=provisioned, **fields) for j in judged}
