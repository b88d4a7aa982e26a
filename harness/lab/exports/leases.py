"""Leases on export cache entries: a run that will use an entry holds it until the run ends,
so another run's LRU eviction on the same host never removes what a live night still needs
(a night that exported waits for its devices before it provisions the exports).

A lease is an empty file `leases/<key>.<pid>_<start ticks>`: the holder's pid and its process
start time (harness/lab/labgrid/places.py), so a lease lives exactly as long as the process
that took it, and a reused pid holds nothing. No release is needed: a run's leases die with
it and are swept by the next eviction (a process that runs more than one stage may release).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from harness.hostfiles import write_error
from harness.lab.labgrid import process_alive, process_tag


class Leases:
    def __init__(self, folder: Path):
        self.folder = folder

    def hold(self, keys: Iterable[str]) -> None:
        """This process holds `keys` until it ends."""
        tag = process_tag()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for key in keys:
                os.close(os.open(self.folder / f"{key}.{tag}", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        except OSError as exc:
            raise write_error(self.folder, exc) from None

    def release(self, keys: Iterable[str]) -> None:
        """This process is done with `keys` (a process that runs more than one stage)."""
        tag = process_tag()
        for key in keys:
            with contextlib.suppress(OSError):
                (self.folder / f"{key}.{tag}").unlink()

    def held(self) -> set[str]:
        """The keys some live process holds; the leases of processes that are gone are removed."""
        keys: set[str] = set()
        for path in self.folder.glob("*") if self.folder.is_dir() else []:
            key, _, tag = path.name.partition(".")
            if tag and process_alive(tag):
                keys.add(key)
            else:
                with contextlib.suppress(OSError):
                    path.unlink()
        return keys


__all__ = ["Leases"]
