"""Device claims through a labgrid coordinator: the multi-host claim engine.

A device with `labgrid: {place: NAME}` (or `labgrid: {tags: {...}}`, a reservation) in
devices.yaml is claimed by acquiring its labgrid place on the coordinator the file names,
so runs on every host and people using `labgrid-client acquire` see one truth. The place's
resources say where the device is: a `NetworkService` (ssh boards) or the lab host's adb
server published as a named `NetworkService` (default name `ADBServer`). See docs/labgrid.md.

labgrid keeps a place acquired when its client dies. So a claim writes who holds it into the
place's tags (`harness_run`, `harness_pid` = pid and process start time on the holder's host),
and every claim first releases places its own host+user left behind from runs that no longer
live; a place held by anyone else, or by a live run, is never touched.

labgrid's client is asyncio + gRPC: one `ClientSession` per coordinator per process (gRPC
shares one connection per target, and the coordinator keys its clients by connection), run on
its own event-loop thread; every claim of the process goes through it.
"""

from harness.lab.labgrid.claim import LabgridClaim, resolve_address
from harness.lab.labgrid.coordinator import PROCESS_COORDINATORS, Coordinator, Coordinators
from harness.lab.labgrid.holders import labgrid_holders
from harness.lab.labgrid.imports import LabgridError, import_labgrid_client
from harness.lab.labgrid.places import (
                                        TAG_PID,
                                        TAG_PURPOSE,
                                        TAG_RUN,
                                        TAG_TOKEN,
                                        PlaceResource,
                                        PlaceState,
                                        identity,
                                        process_alive,
                                        process_tag,
                                        tag_value,
)

__all__ = ["PROCESS_COORDINATORS", "TAG_PID", "TAG_PURPOSE", "TAG_RUN", "TAG_TOKEN", "Coordinator", "Coordinators",
           "LabgridClaim", "LabgridError", "PlaceResource", "PlaceState", "identity", "import_labgrid_client",
           "labgrid_holders", "process_alive", "process_tag", "resolve_address", "tag_value"]
