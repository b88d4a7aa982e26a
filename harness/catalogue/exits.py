"""How a process ended, read from its exit code: the signal that killed it and its name. Every
reader of a run's end (the runner's classifier, QNN's log reader, an export build) asks here."""

from __future__ import annotations

import signal as signal_mod


def signal_of(exit_code: int | None, shell: bool = True) -> int | None:
    """Signal that ended the process: Python's subprocess reports -N; a shell reports 128+N
    (`shell`: the code came through one; a program run directly may exit 130 on its own)."""
    if exit_code is None:
        return None
    if exit_code < 0:
        return -exit_code
    if shell and 128 < exit_code < 160:
        return exit_code - 128
    return None


def signal_name(sig: int) -> str:
    try:
        return signal_mod.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
