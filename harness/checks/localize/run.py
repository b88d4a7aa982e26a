"""Localize one folder of pulled files (the debug build's ETRecord and encodings, a run's ETDump and
debug buffer: harness.runners.executorch.localize makes them): compare per op and judge.

Files that cannot be compared (damaged, of the wrong types, a FIFO, from another program) are
undecidable, never "departed" and never an exception (docs/localize.md#undecidable)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

from harness.checks.localize.judge import judge
from harness.checks.localize.layout import DEBUG_OUTPUT, ENCODINGS, ETDUMP, ETRECORD, DebugFiles
from harness.errors import HarnessError
from harness.evidence import Localization, Outcome

_SAID_CHARS = 300  # of what ExecuTorch's tools printed, kept in the reason


@contextlib.contextmanager
def _stdout_kept(said: list[str]) -> Iterator[None]:
    """fd 1 to a temporary file while ExecuTorch's readers run: its `flatc` child prints its errors on
    stdout, which would break a `--json` answer; what it printed is handed back in `said`."""
    sys.stdout.flush()
    with tempfile.TemporaryFile() as kept:
        saved = os.dup(1)
        os.dup2(kept.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            kept.seek(0)
            said.append(kept.read().decode("utf-8", "replace").strip())


def _undecidable(fmt: str, threshold_db: float | None, reason: str) -> Localization:
    return Localization(Outcome.UNDECIDABLE, threshold_db or 0.0, fmt, (), reason=reason)


def localize(files: DebugFiles, fmt: str | None = None, threshold_db: float | None = None, *,
             keep_stdout: bool = False) -> Localization:
    """The verdict over a folder holding the debug build's files and a run's ETDump + debug buffer.
    `keep_stdout`: what ExecuTorch's readers print goes into the reason, not to fd 1 (a command's
    JSON answer; process-wide, so never in a night's threads)."""
    missing = [n for n in (ETDUMP, DEBUG_OUTPUT, ETRECORD, ENCODINGS) if not files.path(n).is_file()]
    if missing:
        return _undecidable(fmt or "", threshold_db, f"{files.folder}: missing (or not regular files) "
                            f"{', '.join(missing)}")
    try:
        fmt = fmt or str(files.encodings().get("format", ""))
    except HarnessError as exc:
        return _undecidable(fmt or "", threshold_db, str(exc))
    from harness.checks.localize.compare import compare

    said: list[str] = []
    try:
        with _stdout_kept(said) if keep_stdout else contextlib.nullcontext():
            ops = compare(files)
    except HarnessError as exc:
        return _undecidable(fmt, threshold_db, str(exc))
    except (Exception, RecursionError) as exc:  # noqa: BLE001 (ExecuTorch's readers raise any type on damaged files)
        printed = f"; it printed: {said[0][-_SAID_CHARS:]}" if said and said[0] else ""
        return _undecidable(fmt, threshold_db, f"{files.folder}: ExecuTorch's Inspector could not compare these "
                            f"files ({type(exc).__name__}: {str(exc)[:_SAID_CHARS]}){printed}; "
                            "the ETDump, debug buffer, ETRecord and encodings must come from one debug build "
                            "and its run")
    return judge(ops, fmt, threshold_db)
