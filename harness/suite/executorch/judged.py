"""The ExecuTorch suite's last check, `judged` (docs/executorch-reference.md#nothing-judged-is-not-green):
a run whose QNN cells were all skipped for want of a float reference, or whose asked-for
localization was all skipped for want of a debug build, judged nothing, and is not green. It fails
`unjudged`, naming each cell and what it lacked, unless the user allows it (--allow-unjudged, a
plan's `allow_unjudged: true`): then it skips, still saying what was not judged."""

from __future__ import annotations

from collections.abc import Sequence

from harness.outcomes import FailureClass, Status
from harness.report import TestRecord
from harness.suite.executorch.checks import EtInput
from harness.suite.model import CheckCall
from harness.verdict import Verdict

# The testcases whose verdict judges a QNN program (registry ET_FORMAT_RUNS, ET_LOCALIZE).
JUDGING = ("test_quant_format_runs[", "test_localize[")


def _group(records: Sequence[TestRecord], prefix: str) -> list[TestRecord]:
    return [r for r in records if r.name.rsplit("::", 1)[-1].startswith(prefix)]


def unjudged(records: Sequence[TestRecord]) -> list[str]:
    """Per judging check: when none of its cells was judged and some skipped for a want (a skip of
    class `unjudged`), each of those with its reason; [] when something was judged."""
    out = []
    for prefix in JUDGING:
        cells = _group(records, prefix)
        if any(r.status is not Status.SKIPPED for r in cells):
            continue
        out += [f"{r.name.rsplit('::', 1)[-1]}: {r.message}" for r in cells if r.failure_class is FailureClass.UNJUDGED]
    return out


def nothing_unjudged(c: CheckCall[EtInput]) -> Verdict:
    """Fails `unjudged` when the run's QNN cells judged nothing for want of what they need."""
    records = [r for r in c.inp.siblings() if r.device == c.inp.device.name]
    judging = [r for p in JUDGING for r in _group(records, p)]
    if not judging:
        return Verdict.skipped("no QNN cell ran on this device")
    left = unjudged(records)
    if not left:
        n = sum(1 for r in judging if r.status is not Status.SKIPPED)
        return Verdict.passed(f"{n} QNN cell(s) judged")
    said = f"nothing of this export's QNN programs was judged: {'; '.join(left)}"
    if c.inp.allow_unjudged:
        return Verdict.skipped(f"{said} (allowed: --allow-unjudged / the plan's `allow_unjudged: true`)")
    return Verdict.failed(FailureClass.UNJUDGED, f"{said}; give the export what it lacks "
                          "(docs/executorch-reference.md#nothing-judged-is-not-green) or allow it with "
                          "--allow-unjudged (a plan's `allow_unjudged: true`)")


__all__ = ["nothing_unjudged", "unjudged"]
