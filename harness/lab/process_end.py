"""The end of a process that ran a night: its last garbage collections kept short.

At exit the interpreter runs full garbage collections while it tears its modules down, each
walking every object still alive: matplotlib's, numpy's and Jinja2's module state (the HTML
report's) and the night's own. That was 0.2-0.6 s of a stopped 1 000-device night's exit,
after every report was written (docs/lab-scale.md). `gc.freeze()` as the first exit handler
moves those objects out of the collector's sight. Nothing is skipped that a night needs: a
night closes its files, claims and history itself before `run_night` returns, every other
exit handler still runs (logging's flush), the standard streams are still flushed and each
object still freed by its reference count; only reference cycles among objects alive at exit
are left to the process's end instead of being collected first. Not `os._exit`: that would
skip the exit handlers and the flushes of whatever called the night (a test, a user's
script)."""

from __future__ import annotations

import atexit
import gc


def freeze_at_exit() -> None:
    """Have the interpreter freeze the collector's objects as the exit begins (once per
    process however many nights it runs: atexit.unregister removes a previous one)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
