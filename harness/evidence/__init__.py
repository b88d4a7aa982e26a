"""Typed evidence beside a record's verdict (base.py): one frozen type per check family, its
JSON only at the byte boundary, and how each report shows it (its JUnit properties, HTML rows and
history columns: base.py `Evidence`). `KINDS` maps every key of a record's extras that a family is
written under to that family (a spread family: each of its KEYS); a family's module is listed
here when it lands (FAMILIES: the one list the records and every reporter read;
tests/report/test_evidence_registry.py fails on a family module left out)."""

from __future__ import annotations

from collections.abc import Mapping

from harness.evidence.agreement import TextAgreement
from harness.evidence.base import Cell, Column, Evidence, EvidenceSet, Fold, JsonObject, Row, Spread, Tone, fmt3, fmt6
from harness.evidence.etdump import BackendTime, EtdumpSummary, Phases
from harness.evidence.export_build import CacheUse, ExportBuild
from harness.evidence.export_verdict import (
    CoherenceFigures,
    ExportLines,
    ExportVerdictEvidence,
    ExportVerdictLine,
    Figures,
    Instrument,
    LineVerdict,
    TfFigures,
)
from harness.evidence.float_reference import FloatReferenceAgreement, PromptAgreement
from harness.evidence.lab_run import LabRun
from harness.evidence.localize import Localization, LocalizeEvidence, OpGap, OpsDeparture, Outcome
from harness.evidence.mnn_npu_log import CpuFallback, MnnNpuLog, ModuleSpeed
from harness.evidence.op_cycles import OpCycle, OpCycles, OpCyclesRun
from harness.evidence.placement import (
    MNN_QNN_PLUGIN,
    NPU_BACKEND,
    NPU_DELEGATES,
    MethodPlacement,
    Placed,
    Placement,
    PlacementEvidence,
    PlacementUnread,
    count_pairs,
    counted,
    parse_expected_cpu_ops,
    with_expected,
)
from harness.evidence.program_size import ProgramSize
from harness.evidence.provenance import Provenance, RanOn, Tier
from harness.evidence.qnn_profile import CpuOp, ProfileTable, QnnOpCycles, QnnProfile, QnnSummaryEvent
from harness.evidence.quant_finding import QuantDeparture, QuantFinding
from harness.evidence.teacher_forced import Agreement, NearStep, StepContext, StepDeparture, TeacherForced, TfLine
from harness.evidence.timing import Clock, TimedOn, Timing

FAMILIES: tuple[type[Evidence], ...] = (
    TeacherForced, ExportVerdictEvidence, FloatReferenceAgreement, PlacementEvidence, Provenance, LocalizeEvidence,
    QuantFinding, EtdumpSummary, QnnProfile, TextAgreement, Timing, OpCycles, MnnNpuLog, ExportBuild, PlacementUnread,
    ProgramSize,
)
SPREAD: tuple[type[Spread], ...] = (LabRun,)
KINDS: Mapping[str, type[Evidence]] = {kind.KEY: kind for kind in FAMILIES} | \
    {key: kind for kind in SPREAD for key in kind.KEYS}


def _columns(kinds: tuple[type[Evidence], ...]) -> tuple[Column, ...]:
    """Every family's history columns, once each; two families filling one column must agree on it."""
    seen: dict[str, Column] = {}
    for kind in kinds:
        for col in kind.COLUMNS:
            if seen.setdefault(col.name, col) != col:
                raise TypeError(f"history column {col.name!r}: {kind.__name__} declares it as {col}, "
                                f"another family as {seen[col.name]}")
    return tuple(seen.values())


COLUMNS: tuple[Column, ...] = _columns((*FAMILIES, *SPREAD))

__all__ = ["Agreement", "BackendTime", "CacheUse", "Cell", "Clock", "CoherenceFigures", "Column", "COLUMNS",
           "count_pairs", "counted", "CpuFallback", "CpuOp", "EtdumpSummary", "Evidence", "EvidenceSet",
           "ExportBuild", "ExportLines", "ExportVerdictEvidence", "ExportVerdictLine", "FAMILIES", "Figures",
           "FloatReferenceAgreement", "fmt3", "fmt6", "Fold", "Instrument", "JsonObject", "KINDS", "LabRun",
           "LineVerdict", "Localization", "LocalizeEvidence", "MethodPlacement", "MNN_QNN_PLUGIN", "MnnNpuLog",
           "ModuleSpeed", "NearStep", "NPU_BACKEND", "NPU_DELEGATES", "OpCycle", "OpCycles", "OpCyclesRun", "OpGap",
           "OpsDeparture", "Outcome", "parse_expected_cpu_ops", "Phases", "Placed", "Placement", "PlacementEvidence",
           "PlacementUnread", "ProfileTable", "ProgramSize", "PromptAgreement", "Provenance", "QnnOpCycles",
           "QnnProfile", "QnnSummaryEvent", "QuantDeparture", "QuantFinding", "RanOn", "Row", "Spread", "SPREAD",
           "StepContext", "StepDeparture", "TeacherForced", "TextAgreement", "TfFigures", "TfLine", "Tier",
           "TimedOn", "Timing", "Tone", "with_expected"]
