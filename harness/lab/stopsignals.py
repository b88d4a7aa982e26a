"""Ctrl-C and SIGTERM as a stop request: while a night or an export stage runs in the main
thread, the signals only set an Event (and are counted), so no KeyboardInterrupt lands in the
middle of a record write, a claim release or a cache seal. The one home of that handler for
`lab run` (scheduler.py) and `harness export` (exports/cli.py)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def stop_on_signals(stop: threading.Event, signals: list[int] | None = None) -> Iterator[None]:
    """Route SIGINT/SIGTERM to `stop.set()` (appending each to `signals`) until the block ends;
    off the main thread (where Python cannot install handlers) the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, _frame: object) -> None:
        if signals is not None:
            signals.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
