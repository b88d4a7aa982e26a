"""The page's "Export verdicts" table, from each record's ExportLines views (harness.evidence, given
today by the export's verdict family): one export's verdict on one device, a line per instrument."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.evidence import ExportLines
from harness.report.records import TestRecord

SUMMARY_SHOWN = 800


@dataclass
class ExportLine:
    instrument: str
    pair: str
    verdict: str  # pass | warn | fail | not-run: the CSS class
    summary: str


@dataclass
class ExportRow:
    device: str
    suite: str
    model: str
    verdict: str
    lines: list[ExportLine]


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def export_verdicts(records: Sequence[TestRecord]) -> list[ExportRow]:
    out = []
    for r in records:
        for ev in r.evidence.views(ExportLines):
            lines = [ExportLine(ln.instrument.value, ln.pair or "", ln.verdict.value, _clip(ln.summary, SUMMARY_SHOWN))
                     for ln in ev.lines]
            out.append(ExportRow(r.device, r.suite, r.model, ev.verdict.value, lines))
    return out


def is_export_verdict(rec: TestRecord) -> bool:
    """Shown in its own table, not among a device's other results."""
    return bool(rec.evidence.views(ExportLines))
