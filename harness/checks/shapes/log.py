"""The runtime log scan, a view of the failure catalogue (harness/catalogue/lines.yaml): the
upstream shape/graph error strings plus the team's own visual-output guards (`GUARD_*`;
upstream validates nothing, docs/llm-demo-output.md#error-strings).
A patched runtime prints a guard as one line containing the constant, e.g.
`[Error]: visual output missing deepstack_feature: outputs=1`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from harness.catalogue import SHAPE_SCOPES, Catalogue, capped, load_catalogue
from harness.checks.shapes.findings import ShapeKind, shape_finding
from harness.errors import HarnessError
from harness.findings import Finding

# The team's visual-output guard strings (printed by a patched runtime, matched as substrings).
GUARD_NO_IMAGE_EMBEDS = "visual output missing image_embeds"
GUARD_NO_DEEPSTACK = "visual output missing deepstack_feature"
GUARD_DEEPSTACK_SHAPE = "deepstack_embeds shape mismatch"
VISUAL_GUARDS = (GUARD_NO_IMAGE_EMBEDS, GUARD_NO_DEEPSTACK, GUARD_DEEPSTACK_SHAPE)


@dataclass(frozen=True)
class _ShapeLine:
    kind: ShapeKind
    regex: re.Pattern[str]
    hint: str
    fill: bool  # the entry's own hint, which may name the regex's groups as {1}, {2}... ({0}: the line)

    def hint_for(self, line: str, m: re.Match[str]) -> str:
        if not self.fill:
            return self.hint
        try:
            return self.hint.format(line, *(g or "" for g in m.groups()))
        except (IndexError, KeyError, ValueError):
            return self.hint


@lru_cache(maxsize=8)
def _shape_view(cat: Catalogue) -> tuple[_ShapeLine, ...]:
    """The catalogue's entries with a shape kind, for runtime logs (runner output, logcat)."""
    kinds = {k.value for k in ShapeKind}
    out: list[_ShapeLine] = []
    for e in cat.in_scope(*SHAPE_SCOPES):
        if e.shape_kind is None:
            continue
        if e.shape_kind not in kinds:
            raise HarnessError(f"{cat.where(e)}: shape kind {e.shape_kind!r} is not a harness/checks/shapes "
                               "ShapeKind; fix the spelling or add the kind there")
        out.append(_ShapeLine(ShapeKind(e.shape_kind), e.regex, e.shape_hint or e.hint, e.shape_hint is None))
    return tuple(out)


def scan_log_for_shape_errors(text: str, *, source: str = "log", catalogue: Catalogue | None = None) -> list[Finding]:
    """Every shape/graph error line in a runtime log (stdout or logcat), in order: the lines of
    the failure catalogue (harness/catalogue/lines.yaml) that carry a shape kind."""
    view = _shape_view(catalogue or load_catalogue())
    findings: list[Finding] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        for entry in view:
            m = entry.regex.search(capped(line))
            if m:
                findings.append(shape_finding(entry.kind, source, m.group(0).strip()[:160], None, None,
                                              entry.hint_for(line, m), line_no=line_no))
                break
    return findings


__all__ = ["GUARD_DEEPSTACK_SHAPE", "GUARD_NO_DEEPSTACK", "GUARD_NO_IMAGE_EMBEDS", "VISUAL_GUARDS",
           "scan_log_for_shape_errors"]
