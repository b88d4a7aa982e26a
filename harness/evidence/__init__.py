"""Typed evidence beside a record's verdict (base.py): one frozen type per check family, its
JSON only at the byte boundary. `KINDS` names every family a record's JSON line is read back
into; a family's module is listed here when it lands."""

from __future__ import annotations

from collections.abc import Mapping

from harness.evidence.base import Evidence, EvidenceSet, JsonObject
from harness.evidence.export_verdict import ExportVerdictEvidence, ExportVerdictLine
from harness.evidence.localize import Localization, LocalizeEvidence, OpGap, Outcome
from harness.evidence.quant_finding import QuantFinding
from harness.evidence.teacher_forced import TeacherForced

FAMILIES: tuple[type[Evidence], ...] = (TeacherForced, ExportVerdictEvidence, LocalizeEvidence, QuantFinding)
KINDS: Mapping[str, type[Evidence]] = {kind.KEY: kind for kind in FAMILIES}

__all__ = ["Evidence", "EvidenceSet", "ExportVerdictEvidence", "ExportVerdictLine", "FAMILIES", "JsonObject", "KINDS",
           "Localization", "LocalizeEvidence", "OpGap", "Outcome",
           "QuantFinding", "TeacherForced"]
