"""Typed evidence beside a record's verdict (base.py): one frozen type per check family, its
JSON only at the byte boundary. `KINDS` maps every key of a record's extras that a family is
written under to that family (a spread family: each of its KEYS); a family's module is listed
here when it lands."""

from __future__ import annotations

from collections.abc import Mapping

from harness.evidence.agreement import TextAgreement
from harness.evidence.base import Evidence, EvidenceSet, JsonObject, Spread
from harness.evidence.etdump import EtdumpSummary
from harness.evidence.export_verdict import ExportVerdictEvidence, ExportVerdictLine
from harness.evidence.float_reference import FloatReferenceAgreement, PromptAgreement
from harness.evidence.lab_run import LabRun
from harness.evidence.localize import Localization, LocalizeEvidence, OpGap, Outcome
from harness.evidence.mnn_npu_log import CpuFallback, MnnNpuLog, ModuleSpeed
from harness.evidence.op_cycles import OpCycle, OpCycles
from harness.evidence.placement import (
    MNN_QNN_PLUGIN,
    NPU_BACKEND,
    NPU_DELEGATES,
    MethodPlacement,
    Placement,
    PlacementEvidence,
    count_pairs,
    counted,
    parse_expected_cpu_ops,
    with_expected,
)
from harness.evidence.provenance import Provenance, Tier
from harness.evidence.qnn_profile import QnnOpCycles, QnnProfile
from harness.evidence.quant_finding import QuantFinding
from harness.evidence.teacher_forced import TeacherForced
from harness.evidence.timing import Clock, Timing

FAMILIES: tuple[type[Evidence], ...] = (TeacherForced, ExportVerdictEvidence, FloatReferenceAgreement, PlacementEvidence,
                                        Provenance, LocalizeEvidence, QuantFinding, EtdumpSummary, QnnProfile,
                                        TextAgreement, Timing, OpCycles, MnnNpuLog)
SPREAD: tuple[type[Spread], ...] = (LabRun,)
KINDS: Mapping[str, type[Evidence]] = {kind.KEY: kind for kind in FAMILIES} | \
    {key: kind for kind in SPREAD for key in kind.KEYS}

__all__ = ["CpuFallback", "MnnNpuLog", "ModuleSpeed",
           "Clock", "EtdumpSummary", "Evidence", "EvidenceSet", "ExportVerdictEvidence", "ExportVerdictLine", "FAMILIES",
           "FloatReferenceAgreement", "JsonObject", "KINDS", "LabRun", "Localization", "LocalizeEvidence", "MethodPlacement",
           "MNN_QNN_PLUGIN", "NPU_BACKEND", "NPU_DELEGATES", "OpCycle", "OpCycles", "OpGap", "Outcome", "Placement", "PlacementEvidence",
           "PromptAgreement", "Provenance", "QnnOpCycles", "QnnProfile", "QuantFinding", "SPREAD", "Spread", "TeacherForced",
           "TextAgreement", "Timing", "Tier", "count_pairs", "counted", "parse_expected_cpu_ops", "with_expected"]
