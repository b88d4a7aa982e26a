"""An export's verdict on one device (harness.checks.export_verdict): its word and one line per
instrument (static quant, teacher-forced per pair, text coherence), as the summary check made it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Self

from harness.evidence.base import JsonObject


@dataclass(frozen=True)
class ExportVerdictLine:
    instrument: str
    verdict: str
    summary: str
    pair: str | None
    figures: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class ExportVerdictEvidence:
    KEY: ClassVar[str] = "export_verdict"

    verdict: str
    lines: tuple[ExportVerdictLine, ...]
    detail: JsonObject = field(default_factory=dict, compare=False)  # as written (failure_class and all)

    def to_json(self) -> JsonObject:
        return dict(self.detail)

    @classmethod
    def of_json(cls, raw: JsonObject) -> Self:
        verdict = raw.get("verdict")
        if not isinstance(verdict, str) or not verdict:
            raise ValueError("an export verdict without its word")
        lines = tuple(ExportVerdictLine(str(ln.get("instrument", "")), str(ln.get("verdict", "")),
                                        str(ln.get("summary", "")), ln.get("pair") or None,
                                        dict(ln["figures"]) if isinstance(ln.get("figures"), dict) else {})
                      for ln in raw.get("lines") or [] if isinstance(ln, dict))
        return cls(verdict, lines, dict(raw))
