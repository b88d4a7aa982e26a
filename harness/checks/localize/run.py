"""Localize one folder of pulled files (the debug build's ETRecord and encodings, a run's ETDump and
debug buffer: harness.runners.executorch.localize makes them): compare per op and judge."""

from __future__ import annotations

from harness.checks.localize.judge import judge
from harness.checks.localize.layout import ENCODINGS, ETRECORD, DebugFiles
from harness.errors import HarnessError
from harness.evidence import Localization, Outcome


def localize(files: DebugFiles, fmt: str | None = None, threshold_db: float | None = None) -> Localization:
    """The verdict over a folder holding the debug build's files and a run's ETDump + debug buffer."""
    from harness.checks.localize.compare import compare

    fmt = fmt or str(files.encodings().get("format", ""))
    missing = files.missing_run() + [n for n in (ETRECORD, ENCODINGS) if not files.path(n).is_file()]
    if missing:
        return Localization(Outcome.UNDECIDABLE, threshold_db or 0.0, fmt, (),
                            reason=f"{files.folder}: missing {', '.join(missing)}")
    try:
        ops = compare(files)
    except HarnessError as exc:
        return Localization(Outcome.UNDECIDABLE, threshold_db or 0.0, fmt, (), reason=str(exc))
    except (RuntimeError, ValueError, KeyError, IndexError, AssertionError) as exc:
        # ExecuTorch's Inspector raising on these files: a damaged or mismatched ETDump/ETRecord pair.
        return Localization(Outcome.UNDECIDABLE, threshold_db or 0.0, fmt, (),
                            reason=f"{files.folder}: ExecuTorch's Inspector could not compare ({type(exc).__name__}: {exc})")
    return judge(ops, fmt, threshold_db)
