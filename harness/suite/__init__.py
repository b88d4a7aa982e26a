"""Suites: one declarative list of checks each, run by both front doors (pytest suites/ and the
night's job) with the same testcase names, records and verdicts.

- `model`:    Scope, Need, Check, Suite, Instance (what a suite is; a check decides a harness.verdict.Verdict).
- `checks`:   the check functions (calls into checks/ and pipeline) and each scope's input.
- `registry`: QWEN3_VL, QWEN3, EXECUTORCH_QNN, MATRIX (any llm_demo export), `suite_for(name)`.
- `executorch/`: the ExecuTorch suite's checks, profile and input (a face of its own).
- `placement`: where an MNN QNN cell's work ran (its NPU stubs' QNN Plugin ops), `cpu-fallback`.
- `run`:      `run_check`: fit, needs, the check, its verdict into the record.
"""

from harness.suite.checks import DeviceInput, ExportInput, MatrixInput, SummaryInput
from harness.suite.model import Check, Instance, Need, Scope, Suite
from harness.suite.registry import (
    ET_CPU_EXPORTS,
    ET_FORMAT_RUNS,
    EXECUTORCH_QNN,
    GENERATION,
    MATRIX,
    QWEN3,
    QWEN3_VL,
    SUITES,
    case_ids,
    suite_cases,
    suite_for,
)
from harness.suite.run import CheckInput, fit_reason, pair_skip_reason, run_check, select_pairs

__all__ = ["ET_CPU_EXPORTS", "ET_FORMAT_RUNS", "EXECUTORCH_QNN", "GENERATION", "MATRIX", "QWEN3", "QWEN3_VL", "SUITES", "Check",
           "CheckInput", "DeviceInput", "ExportInput", "Instance", "MatrixInput", "Need", "Scope", "Suite",
           "SummaryInput", "case_ids", "fit_reason", "pair_skip_reason", "run_check", "select_pairs", "suite_cases",
           "suite_for"]
