"""One build of an export key at a time on a host: concurrent runs (two nights, a night and
`harness lab export`) that miss the same key take `<cache>/building/<key>.lock` (flock(2), so a
killed builder frees it at once); the one that waited then finds the first one's entry in the
cache instead of building the same bytes again."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

from harness.hostfiles import write_error

_POLL_S = 0.2  # how soon a stop is noticed while another run builds the key


class Turn(Enum):
    FIRST = "first"  # nobody was building the key
    WAITED = "waited"  # another run built it meanwhile: look in the cache again
    STOPPED = "stopped"  # the stop came while waiting: build nothing


@contextlib.contextmanager
def building(folder: Path, key: str, stop: threading.Event) -> Iterator[Turn]:
    """Hold the key's build lock for the body (released when it ends, or with the process)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise write_error(folder, exc) from None
    try:
        turn = Turn.FIRST
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                turn = Turn.WAITED
                if stop.wait(_POLL_S):
                    turn = Turn.STOPPED
                    break
        yield turn
    finally:
        os.close(fd)  # drops the lock


__all__ = ["Turn", "building"]
