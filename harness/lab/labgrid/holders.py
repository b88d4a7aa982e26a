"""Who holds each labgrid device's place, for `harness lab status`."""

from __future__ import annotations

from harness.inventory import DeviceSpec
from harness.lab.labgrid.claim import LabgridClaim
from harness.lab.labgrid.coordinator import PROCESS_COORDINATORS, Coordinators
from harness.lab.labgrid.imports import LabgridError


def labgrid_holders(devices: list[DeviceSpec], coordinators: Coordinators = PROCESS_COORDINATORS) -> dict[str, str]:
    """For `harness lab status`: per labgrid device, who holds its place (or why unknown)."""
    out: dict[str, str] = {}
    for d in devices:
        if d.labgrid is None:
            continue
        try:
            claim = LabgridClaim(d, run_id="status", coordinators=coordinators)
            who = claim.holder()
            c = coordinators.get(d.labgrid.coordinator)
            stale = d.labgrid.place is not None and (p := c.place(d.labgrid.place)) is not None \
                and p.left_by_dead_run(c.me)
            what = d.labgrid.describe()
            out[d.name] = f"{what}: " + (f"held by {who}" + (" (stale: its run is gone)" if stale else "")
                                         if who else "free")
        except LabgridError as exc:
            out[d.name] = f"{d.labgrid.describe()}: unknown ({exc})"
    return out
