"""Typed evidence beside a record's verdict (base.py): one frozen type per check family, its
JSON only at the byte boundary. `KINDS` names every family a record's JSON line is read back
into; a family's module is listed here when it lands."""

from __future__ import annotations

from collections.abc import Mapping

from harness.evidence.base import Evidence, EvidenceSet, JsonObject
from harness.evidence.export_verdict import ExportVerdictEvidence, ExportVerdictLine
from harness.evidence.float_reference import FloatReferenceAgreement, PromptAgreement
from harness.evidence.localize import Localization, LocalizeEvidence, OpGap, Outcome
from harness.evidence.placement import (
    MNN_QNN_PLUGIN,
    NPU_BACKEND,
    NPU_DELEGATES,
    MethodPlacement,
    Placement,
    PlacementEvidence,
    count_pairs,
    parse_expected_cpu_ops,
    with_expected,
)
from harness.evidence.provenance import Provenance, Tier
from harness.evidence.quant_finding import QuantFinding
from harness.evidence.teacher_forced import TeacherForced

FAMILIES: tuple[type[Evidence], ...] = (TeacherForced, ExportVerdictEvidence, FloatReferenceAgreement, PlacementEvidence,
                                        Provenance, LocalizeEvidence, QuantFinding)
KINDS: Mapping[str, type[Evidence]] = {kind.KEY: kind for kind in FAMILIES}

__all__ = ["Evidence", "EvidenceSet", "ExportVerdictEvidence", "ExportVerdictLine", "FAMILIES", "FloatReferenceAgreement",
           "JsonObject", "KINDS", "Localization", "LocalizeEvidence", "MethodPlacement", "MNN_QNN_PLUGIN", "NPU_BACKEND",
           "NPU_DELEGATES", "OpGap", "Outcome", "Placement", "PlacementEvidence", "PromptAgreement", "Provenance", "QuantFinding",
           "TeacherForced", "Tier", "count_pairs", "parse_expected_cpu_ops",
           "with_expected"]
