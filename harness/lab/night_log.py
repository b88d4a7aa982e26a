"""The night's log file (<out>/night.log): what other libraries say while a night runs in this
process (ExecuTorch's `WARNING:root:Number of QNN output ...` once per LayerNorm, torchao's
`Failed to load ...`, torch's deprecations and UserWarnings) is written there, not on the console,
where it would read like errors around results that are fine. The harness's own warnings stay on
the console (and in the file)."""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.hostfiles import prepare_output_dir

NIGHT_LOG = "night.log"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _on_console(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler) \
        and getattr(handler, "stream", None) in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)


def _preload_torch() -> None:
    """torch gives its own loggers a console handler when it is imported; with ExecuTorch installed
    a night imports it anyway (the localization, ETDumps), so it is imported here, before the
    console handlers are moved to the file."""
    if importlib.util.find_spec("executorch") is not None and importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401  (its logging set up now)


@contextmanager
def night_log(out_dir: Path) -> Iterator[Path]:
    """Routes every library's log records and Python warnings into out_dir/night.log while the
    night runs; puts the process's logging back as it was after."""
    path = prepare_output_dir(out_dir, "output folder (--out)") / NIGHT_LOG
    _preload_torch()
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(logging.Formatter(_FORMAT))
    root, ours = logging.getLogger(), logging.getLogger("harness")
    own = logging.StreamHandler(sys.stderr)
    own.setLevel(logging.WARNING)
    own.setFormatter(logging.Formatter("harness: %(message)s"))
    moved = [(lg, h) for lg in [root, *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]
             for h in list(lg.handlers) if _on_console(h)]
    level = root.level
    for lg, h in moved:
        lg.removeHandler(h)
        if lg is not root:
            lg.addHandler(to_file)
    root.addHandler(to_file)  # first: a library's basicConfig() at import then changes nothing
    root.setLevel(min(level or logging.WARNING, logging.INFO))
    ours.addHandler(own)
    logging.captureWarnings(True)
    try:
        yield path
    finally:
        logging.captureWarnings(False)
        ours.removeHandler(own)
        for lg, h in moved:
            lg.removeHandler(to_file)
            lg.addHandler(h)
        root.removeHandler(to_file)
        root.setLevel(level)
        to_file.close()
