"""The checks: each judges one thing an export or a run shows, from real artifacts.
Sub-packages (coherence/, mrope/, quant/, shapes/) have faces of their own; this face holds
the loose modules' names.
This `__init__` is the package's one face; names load on first use (PEP 562), so importing one
name imports only its module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "agreement": ("Agreement", "DriftWarning", "assert_agrees", "compare"),
    "et_reference": ("GreedyReference", "compare_outputs", "generated_after", "match_tokens", "vocab_pieces"),
    "float_reference": ("DEFAULT_BUDGETS", "INDEX", "REFERENCE_DIR", "SCHEMA", "FloatReference", "QuantBudget", "judge_float_reference",
                        "missing_float_reference", "parse_budget_option", "parse_budgets", "quant_budget",
                        "read_float_reference"),
    "export_verdict": ("ExportVerdict", "static_quant_line",
                       "teacher_forced_line", "text_coherence_line", "verdict_of_records"),
    "surprise": ("ReferenceUnavailable", "Scorer", "Surprise"),
    "teacher_forced": ("DEFAULT_THRESHOLDS", "PromptFigures", "PromptJudgement", "Thresholds", "judge_export",
                       "judge_prompt"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.checks.agreement import Agreement as Agreement
    from harness.checks.agreement import DriftWarning as DriftWarning
    from harness.checks.agreement import assert_agrees as assert_agrees
    from harness.checks.agreement import compare as compare
    from harness.checks.et_reference import GreedyReference as GreedyReference
    from harness.checks.et_reference import compare_outputs as compare_outputs
    from harness.checks.et_reference import generated_after as generated_after
    from harness.checks.et_reference import match_tokens as match_tokens
    from harness.checks.et_reference import vocab_pieces as vocab_pieces
    from harness.checks.export_verdict import ExportVerdict as ExportVerdict
    from harness.checks.export_verdict import static_quant_line as static_quant_line
    from harness.checks.export_verdict import teacher_forced_line as teacher_forced_line
    from harness.checks.export_verdict import text_coherence_line as text_coherence_line
    from harness.checks.export_verdict import verdict_of_records as verdict_of_records
    from harness.checks.float_reference import DEFAULT_BUDGETS as DEFAULT_BUDGETS
    from harness.checks.float_reference import INDEX as INDEX
    from harness.checks.float_reference import REFERENCE_DIR as REFERENCE_DIR
    from harness.checks.float_reference import SCHEMA as SCHEMA
    from harness.checks.float_reference import FloatReference as FloatReference
    from harness.checks.float_reference import QuantBudget as QuantBudget
    from harness.checks.float_reference import judge_float_reference as judge_float_reference
    from harness.checks.float_reference import missing_float_reference as missing_float_reference
    from harness.checks.float_reference import parse_budget_option as parse_budget_option
    from harness.checks.float_reference import parse_budgets as parse_budgets
    from harness.checks.float_reference import quant_budget as quant_budget
    from harness.checks.float_reference import read_float_reference as read_float_reference
    from harness.checks.surprise import ReferenceUnavailable as ReferenceUnavailable
    from harness.checks.surprise import Scorer as Scorer
    from harness.checks.surprise import Surprise as Surprise
    from harness.checks.teacher_forced import DEFAULT_THRESHOLDS as DEFAULT_THRESHOLDS
    from harness.checks.teacher_forced import PromptFigures as PromptFigures
    from harness.checks.teacher_forced import PromptJudgement as PromptJudgement
    from harness.checks.teacher_forced import Thresholds as Thresholds
    from harness.checks.teacher_forced import judge_export as judge_export
    from harness.checks.teacher_forced import judge_prompt as judge_prompt
