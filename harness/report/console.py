"""The console's last words on a night (`harness lab run`, before the counts line): each failed
testcase with its class and reason, and under it the lines its cell's evidence gives as a
failure's explanation (the figures against their line, the first departing op), so a reader
sees why without opening the page."""

from __future__ import annotations

from collections.abc import Iterable

from harness.report.records import TestRecord

SHOWN = 20  # failed testcases printed; the page and JUnit hold the rest
_WIDTH = 240


def _clip(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= _WIDTH else line[: _WIDTH - 1] + "\u2026"


def failed_lines(records: Iterable[TestRecord]) -> list[str]:
    """`FAILED device model test: class: reason`, then its cell's explaining lines, once each."""
    records = list(records)
    cells: dict[tuple[str, str, str, str], list[TestRecord]] = {}
    for r in records:
        cells.setdefault((r.device, r.suite, r.model, r.backend_pair.name if r.backend_pair else r.name), []).append(r)
    out: list[str] = []
    bad = [r for r in records if r.is_bad]
    for r in bad[:SHOWN]:
        message = _clip(r.message)
        out.append(f"  FAILED {r.device} {r.model + ' ' if r.model else ''}{r.name}: {r.cause}: {message}")
        cell = cells[(r.device, r.suite, r.model, r.backend_pair.name if r.backend_pair else r.name)]
        said = {message}
        for row in dict.fromkeys(row for c in cell for ev in c.evidence for row in ev.rows() if row.first):
            text = _clip(row.text)
            if not any(text in s for s in said):
                out.append(f"      {row.label}: {text}")
                said.add(text)
    if len(bad) > SHOWN:
        out.append(f"  ... {len(bad) - SHOWN} more failed testcases: see the report")
    return out
