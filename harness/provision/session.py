"""One sync of one set on a device (harness.provision.sync): its round trips, layout and run
id, and the device commands that read what is there and prepare a push (the probe)."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence

from harness import soc
from harness.errors import ProvisionError
from harness.provision.hashcache import HashCache
from harness.provision.layout import DeviceLayout
from harness.provision.manifest import DeviceStamp
from harness.provision.plan import Item
from harness.provision.probe import Probe, parse_probe
from harness.provision.progress import Progress
from harness.provision.scripts import PREPARE_SCRIPT, PROBE_SCRIPT, script_argv, split_sections
from harness.transport import SyncsSets, parse_df_free

MAX_COMMAND = 48 << 10  # keep each device command well under adb's 256 KiB service limit


class SyncSession:
    """One sync of one set: counts round trips, knows the layout and the run id."""

    def __init__(self, transport: SyncsSets, layout: DeviceLayout, cache: HashCache, progress: Progress,
                 verify: str):
        if verify not in ("size", "sha256"):
            raise ValueError(f"verify must be 'size' or 'sha256', not {verify!r}")
        self.t, self.layout, self.cache, self.progress, self.verify = transport, layout, cache, progress, verify
        self.device = transport.device
        self.round_trips = 0
        self.placed = 0  # files verified and put in place by this run
        self.placed_stamps: dict[str, DeviceStamp] = {}
        self.final: list[Item] = []  # the push's last batch, checked, placed by the commit
        self.df_free: int | None = None
        self.prepared = False  # run folder tree made, SoC checked, df read (by the probe)
        self.run_dir = posixpath.join(layout.incoming, os.urandom(6).hex())

    def script(self, script: str, args: Sequence[str], *, what: str, check: bool = True) -> str:
        # No timeout: these scripts only stat/link/rename, and the base shell() gives every
        # command with a timeout a pid file (a subshell and an `rm` on the device) and a stop
        # watch; a stop must not cut a commit half-way either (transport/stop.py).
        self.round_trips += 1
        res = self.t.shell(script_argv(script, args))
        if check and not res.ok:
            detail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-5:])
            raise ProvisionError(f"{self.device.name}: {what} failed (exit {res.exit_code}): {detail}; "
                                 "run `harness status` for the device and provision again")
        return res.stdout

    def _run_dirs(self, items: Sequence[Item]) -> list[str]:
        return sorted({posixpath.join(self.run_dir, posixpath.dirname(it.file.rel))
                       for it in items if "/" in it.file.rel})

    def probe(self, items: Sequence[Item]) -> Probe:
        """Read the manifests, journal and stats and, in the same round trip, prepare a push of
        any of `items` (run folder tree for all of them: a few folders more than needed cost
        nothing, a second round trip does); the tree goes with the run's clean-up."""
        L = self.layout
        dirs = self._run_dirs(items)
        prep = sum(len(d) + 3 for d in dirs) < MAX_COMMAND // 2  # else a separate prepare()
        # The set's parent folder too: the commit then makes no folder (a process each).
        args = [L.work_dir, L.journal, *([self.run_dir, L.incoming, posixpath.dirname(L.manifest),
                                          posixpath.dirname(L.set_dir), *dirs] if prep else ["", "", ""])]
        out = self.script(PROBE_SCRIPT, args, what="reading the device manifests", check=False)
        probe = parse_probe(out, L, self.device.name)
        if prep and "@@prepared" in out.split("\n"):
            self._prepared(out)
        return probe

    def prepare(self, items: Sequence[Item]) -> None:
        """Create the run folder tree (when the probe could not)."""
        out = self.script(PREPARE_SCRIPT, [self.run_dir, self.layout.incoming, self.layout.work_dir,
                                           *self._run_dirs(items), posixpath.dirname(self.layout.manifest)],
                          what="preparing the push")
        self._prepared(out)

    def _prepared(self, out: str) -> None:
        """Check the device is the SoC the inventory says (a wrong serial would put a v79
        export on a v75 phone the inventory calls v79); note the free space."""
        self.prepared = True
        self.df_free = parse_df_free("\n".join(split_sections(out).get("df", [])))
        reported = next((ln.strip() for ln in split_sections(out).get("soc", []) if ln.strip()), "")
        info = soc.lookup(reported) if reported else None
        if info is not None and info.model != self.device.soc_model:
            raise ProvisionError(
                f"{self.device.name}: devices.yaml says {self.device.soc_model} (HTP {self.device.htp_arch}) but the "
                f"device reports ro.soc.model={reported} (HTP {info.htp_arch}); fix `soc:` or the serial in "
                f"{self.device.source or 'devices.yaml'} before provisioning")


__all__ = ["MAX_COMMAND", "SyncSession"]
