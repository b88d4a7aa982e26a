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

from __future__ import annotations

import asyncio
import dataclasses
import getpass
import os
import re
import socket
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, TypeVar

from harness.errors import HarnessError
from harness.inventory import AdbServer, DeviceSpec
from harness.lab.locks import DeviceBusy

T = TypeVar("T")
SayFn = Callable[[str], None]

TAG_RUN, TAG_PID, TAG_TOKEN, TAG_PURPOSE = "harness_run", "harness_pid", "harness_token", "harness_purpose"
_OUR_TAGS = (TAG_RUN, TAG_PID, TAG_TOKEN, TAG_PURPOSE)
_CALL_TIMEOUT_S = 30.0
_POLL_S = 0.5


class LabgridError(HarnessError):
    """The coordinator cannot be used for this claim (down, missing place, bad resources)."""


def _missing_labgrid() -> LabgridError:
    return LabgridError("devices.yaml names a labgrid coordinator but labgrid is not installed; "
                        "install it with `pip install 'harness[labgrid]'`")


def tag_value(text: str) -> str:
    """labgrid tag values are lower-case a-z, 0-9 and _ (labgrid.remote.common.TAG_VAL)."""
    return re.sub(r"[^a-z0-9_]", "_", text.lower())


def identity() -> str:
    """Who this process is to the coordinator: `host/user`, as labgrid-client says it
    (LG_HOSTNAME / LG_USERNAME override, like labgrid's own ClientSession)."""
    return f"{os.environ.get('LG_HOSTNAME', socket.gethostname())}/{os.environ.get('LG_USERNAME', getpass.getuser())}"


def _start_ticks(pid: int) -> str | None:
    """The process's start time (clock ticks since boot): with the pid it names one process,
    not whatever later reuses the pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_tag(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{pid}_{_start_ticks(pid) or 0}"


def process_alive(tag: str) -> bool:
    """Is the process a `harness_pid` tag names (on this host) still running?"""
    pid_text, _, ticks = tag.partition("_")
    if not pid_text.isdigit():
        return False
    now = _start_ticks(int(pid_text))
    if now is None:
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not os.path.exists("/proc/self/stat")  # /proc exists: the pid is gone
    return ticks in ("", "0") or now == ticks


@dataclass(frozen=True)
class PlaceState:
    """A snapshot of one place as the coordinator published it."""

    name: str
    acquired: str | None  # "host/user"
    tags: dict[str, str]
    comment: str = ""
    reservation: str | None = None

    @property
    def harness_run(self) -> str | None:
        return self.tags.get(TAG_RUN)

    def describe_holder(self) -> str:
        if not self.acquired:
            return "nobody"
        text = self.acquired
        if self.harness_run:
            what = self.tags.get(TAG_PURPOSE, "")
            text += f" (harness {what + ' ' if what else ''}run {self.harness_run}, " \
                    f"pid {self.tags.get(TAG_PID, '?').split('_')[0]})"
        if self.comment:
            text += f" [{self.comment}]"
        return text

    def left_by_dead_run(self, me: str) -> bool:
        """Held by this host+user for a harness run whose process is gone."""
        pid_tag = self.tags.get(TAG_PID)
        return bool(self.acquired == me and self.harness_run and pid_tag and not process_alive(pid_tag))


@dataclass(frozen=True)
class PlaceResource:
    name: str  # the match's rename, else the resource name
    cls: str
    params: dict[str, Any]
    available: bool
    path: str  # exporter/group/cls/name


class Coordinator:
    """A live session with one labgrid coordinator, on the event-loop thread of its
    `Coordinators`. Thread-safe: every call is handed to the loop and waited for."""

    def __init__(self, address: str, loop: asyncio.AbstractEventLoop):
        self.address = address
        self.me = identity()
        self._loop = loop
        self._session: Any = None
        self._sweep_lock = threading.Lock()
        self._run(self._start(), timeout=15)

    # ---- plumbing -----------------------------------------------------------------------
    async def _start(self) -> None:
        from labgrid.remote.client import ClientSession

        session = ClientSession(address=self.address, loop=self._loop)
        try:
            await session.start()
        except Exception as exc:
            await session.close()
            raise LabgridError(
                f"labgrid coordinator {self.address} does not answer ({exc}); start it "
                f"(`labgrid-coordinator -l {self.address}`) or fix `labgrid.coordinator` in devices.yaml") from None
        self._session = session

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = _CALL_TIMEOUT_S) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise LabgridError(f"labgrid coordinator {self.address} did not answer within {timeout:.0f} s; "
                               "check that it runs and is reachable") from None

    @property
    def alive(self) -> bool:
        s = self._session
        return s is not None and not s.stopping.is_set() and self._loop.is_running()

    def close(self) -> None:
        session, self._session = self._session, None

        async def stop() -> None:
            if session is not None:
                await session.stop()
                await session.close()

        if self._loop.is_running():
            try:
                self._run(stop(), timeout=5)
            except Exception:  # a dead coordinator cannot be told goodbye
                pass

    async def _call(self, what: str, rpc: str, request: Any) -> Any:
        import grpc

        session = self._session
        if session is None or session.stopping.is_set():
            raise LabgridError(f"labgrid coordinator {self.address} went away during {what}; "
                               "check that it runs, then run again")
        try:
            response = await getattr(session.stub, rpc)(request)
            await session.sync_with_coordinator()  # our own view includes the change
            return response
        except grpc.aio.AioRpcError as exc:
            raise _RpcRefused(exc.code().name, exc.details() or "") from None

    # ---- reading ------------------------------------------------------------------------
    def place(self, name: str) -> PlaceState | None:
        async def read() -> PlaceState | None:
            await self._session.sync_with_coordinator()
            p = self._session.places.get(name)
            return None if p is None else _state(p)

        return self._run(read())

    def places(self) -> list[PlaceState]:
        async def read() -> list[PlaceState]:
            await self._session.sync_with_coordinator()
            return [_state(p) for p in self._session.places.values()]

        return self._run(read())

    def resources(self, place_name: str) -> list[PlaceResource]:
        """The resources a place matches (named as the place's matches rename them)."""
        async def read() -> list[PlaceResource]:
            place = self._session.places.get(place_name)
            found: list[PlaceResource] = []
            if place is None:
                return found
            for exporter, groups in self._session.resources.items():
                for group, entries in groups.items():
                    for rname, entry in entries.items():
                        path = (exporter, group, entry.cls, rname)
                        match = place.getmatch(path)
                        if match is not None:
                            found.append(PlaceResource(match.rename or rname, entry.cls, dict(entry.params),
                                                       bool(entry.avail), "/".join(path)))
            return found

        return self._run(read())

    # ---- changing -----------------------------------------------------------------------
    def _pb(self) -> Any:
        from labgrid.remote.generated import labgrid_coordinator_pb2

        return labgrid_coordinator_pb2

    def acquire(self, name: str) -> None:
        self._run(self._call(f"acquiring place {name}", "AcquirePlace", self._pb().AcquirePlaceRequest(placename=name)))

    def release(self, name: str, *, holder: str) -> None:
        """Release only while `holder` holds it (the coordinator checks, so a place taken
        over meanwhile by someone else stays theirs)."""
        self._run(self._call(f"releasing place {name}", "ReleasePlace",
                             self._pb().ReleasePlaceRequest(placename=name, fromuser=holder)))

    def set_tags(self, name: str, tags: dict[str, str]) -> None:
        """Set tags; an empty value deletes the tag (labgrid's rule)."""
        self._run(self._call(f"tagging place {name}", "SetPlaceTags",
                             self._pb().SetPlaceTagsRequest(placename=name, tags=tags)))

    def create_reservation(self, tags: dict[str, str], prio: float) -> str:
        pb = self._pb()
        request = pb.CreateReservationRequest(filters={"main": pb.Reservation.Filter(filter=tags)}, prio=prio)
        return self._run(self._call("creating a reservation", "CreateReservation", request)).reservation.token

    def poll_reservation(self, token: str) -> tuple[str, str | None]:
        """(state name, allocated place or None); polling also keeps the reservation alive."""
        from labgrid.remote.common import Reservation

        response = self._run(self._call(f"polling reservation {token}", "PollReservation",
                                        self._pb().PollReservationRequest(token=token)))
        res = Reservation.from_pb2(response.reservation)
        places = res.allocations.get("main") or [None]
        return res.state.name, places[0]

    def cancel_reservation(self, token: str) -> None:
        self._run(self._call(f"cancelling reservation {token}", "CancelReservation",
                             self._pb().CancelReservationRequest(token=token)))

    # ---- clean-up of runs that died -----------------------------------------------------
    def release_dead_runs(self, say: SayFn | None = None) -> list[str]:
        """Release places this host+user holds for harness runs that no longer live, and
        drop harness tags a crash left on free places. Returns the places released."""
        released = []
        # One sweep at a time in this process, each on a fresh read: a sweep that read a place
        # before another sweep released it could otherwise release it again after a live run
        # of ours re-acquired it. Each place is read once more right before its release, which
        # narrows the same race between two processes of one user to milliseconds.
        with self._sweep_lock:
            for p in self.places():
                if p.left_by_dead_run(self.me):
                    fresh = self.place(p.name)
                    if fresh is None or not fresh.left_by_dead_run(self.me):
                        continue
                    try:
                        self.release(p.name, holder=self.me)
                    except _RpcRefused:
                        continue  # released meanwhile
                    released.append(p.name)
                    if say is not None:
                        say(f"labgrid place {p.name}: released; it was left by harness run {p.harness_run}, "
                            "which died without releasing it")
                    self.forget_run(fresh)
                elif not p.acquired and p.harness_run and not process_alive(p.tags.get(TAG_PID, "")):
                    self.forget_run(p)
        return released

    def forget_run(self, p: PlaceState) -> None:
        """Drop a run's tags from a place it no longer holds, and its reservation."""
        ours = {k: "" for k in _OUR_TAGS if k in p.tags}
        try:
            if ours:
                self.set_tags(p.name, ours)
            if p.tags.get(TAG_TOKEN):
                self.cancel_reservation(p.tags[TAG_TOKEN].upper())  # labgrid tokens are A-Z0-9
        except _RpcRefused:
            pass  # the place was deleted or the reservation expired meanwhile


class _RpcRefused(LabgridError):
    def __init__(self, code: str, details: str):
        super().__init__(f"{code}: {details}")
        self.code, self.details = code, details


def _state(p: Any) -> PlaceState:
    return PlaceState(name=p.name, acquired=p.acquired or None, tags=dict(p.tags), comment=p.comment or "",
                      reservation=p.reservation)


class Coordinators:
    """The sessions of this process: one per coordinator address, all on one event-loop
    thread (gRPC's asyncio layer wants one loop; see the module docstring), reopened when
    their coordinator went away. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Coordinator] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            try:
                import labgrid.remote.client  # noqa: F401
            except ImportError:
                raise _missing_labgrid() from None
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="labgrid-client")
            self._thread.start()
        return self._loop

    def get(self, address: str) -> Coordinator:
        with self._lock:
            c = self._open.get(address)
            if c is not None and c.alive:
                return c
            if c is not None:
                c.close()
                del self._open[address]
            c = Coordinator(address, self._running_loop())
            self._open[address] = c
            return c

    def close(self) -> None:
        """Close every session and stop the loop (the next get() starts afresh)."""
        with self._lock:
            for c in self._open.values():
                c.close()
            self._open.clear()
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()


# gRPC shares one connection per target per process and the coordinator keys its clients by
# connection, so two sessions of one process to one coordinator would collide: one registry.
PROCESS_COORDINATORS = Coordinators()


def resolve_address(device: DeviceSpec, place: str, resources: list[PlaceResource]) -> DeviceSpec:
    """The device spec to connect with: host and port from the place's NetworkService."""
    lg = device.labgrid
    assert lg is not None
    found = [r for r in resources if r.name == lg.resource]
    have = ", ".join(f"{r.name} ({r.path})" for r in resources) or "none"
    if not found:
        raise LabgridError(
            f"{device.name}: labgrid place {place} has no resource named {lg.resource} (it has: {have}); "
            f"publish the {'adb server' if device.transport == 'adb' else 'ssh service'} in the exporter config "
            f"as `{lg.resource}: {{cls: NetworkService, address: ..., port: ..., username: ...}}` and match it, "
            f"or set `labgrid.resource` in {device.source or 'devices.yaml'}")
    r = found[0]
    if r.cls != "NetworkService":
        raise LabgridError(f"{device.name}: resource {r.path} of place {place} is a {r.cls}, not a NetworkService; "
                           "publish the address as a NetworkService")
    if not r.available:
        raise LabgridError(f"{device.name}: resource {r.path} of place {place} is not available (its exporter is "
                           "offline?); check `labgrid-client resources` and the lab host's labgrid-exporter")
    host, port, user = str(r.params.get("address", "")), r.params.get("port"), str(r.params.get("username", ""))
    if not host or not isinstance(port, int):
        raise LabgridError(f"{device.name}: resource {r.path} of place {place} has no address/port ({r.params}); "
                           "fix the exporter config")
    if device.transport == "adb":
        via = device.adb_server.via_ssh if device.adb_server is not None else None
        return dataclasses.replace(device, adb_server=AdbServer(host=host, port=port, via_ssh=via))
    assert device.ssh is not None
    if not user:
        raise LabgridError(f"{device.name}: resource {r.path} of place {place} has no username; add "
                           "`username:` (the ssh login) to it in the exporter config")
    return dataclasses.replace(device, ssh=dataclasses.replace(device.ssh, host=host, port=port, user=user))


class LabgridClaim:
    """Claim one device through its labgrid place (named, or allocated by a reservation).

    `acquire` waits while someone else holds the place (saying who), releases places this
    host+user's dead runs left, tags the place with this run, and returns the device spec
    with the address the place publishes. `release` gives back only what this claim holds.
    """

    def __init__(self, device: DeviceSpec, *, run_id: str, purpose: str = "",
                 coordinators: Coordinators = PROCESS_COORDINATORS):
        if device.labgrid is None:
            raise ValueError(f"{device.name} has no labgrid place")
        self.device = device
        self.spec = device.labgrid
        self.run_id = run_id
        self.purpose = purpose
        self._coordinators = coordinators
        self._place: str | None = None  # the place this claim holds
        self._token: str | None = None  # its reservation

    @property
    def place(self) -> str | None:
        return self._place

    def _coordinator(self) -> Coordinator:
        return self._coordinators.get(self.spec.coordinator)

    def _where(self) -> str:
        return f"{self.device.name}: {self.spec.describe()}"

    # ---- acquire ------------------------------------------------------------------------
    def acquire(self, wait_s: float, *, say: SayFn, cancel: threading.Event | None = None) -> DeviceSpec:
        c = self._coordinator()
        c.release_dead_runs(say)
        deadline = time.monotonic() + wait_s
        if self.spec.place is not None:
            name = self._acquire_named(c, self.spec.place, deadline, wait_s, say, cancel)
        else:
            name = self._acquire_reserved(c, deadline, wait_s, say, cancel)
        self._place = name
        try:
            tags = {TAG_RUN: tag_value(self.run_id), TAG_PID: process_tag()}
            if self.purpose:
                tags[TAG_PURPOSE] = tag_value(self.purpose)
            if self._token:
                tags[TAG_TOKEN] = tag_value(self._token)
            c.set_tags(name, tags)
            return resolve_address(self.device, name, c.resources(name))
        except BaseException:
            self.release()
            raise

    def _acquire_named(self, c: Coordinator, name: str, deadline: float, wait_s: float, say: SayFn,
                       cancel: threading.Event | None) -> str:
        told = False
        while True:
            p = c.place(name)
            if p is None:
                raise LabgridError(
                    f"{self._where()}: the coordinator has no place {name!r}; create it with "
                    f"`labgrid-client -x {c.address} -p {name} create` and `add-match` its resources, "
                    f"or fix `labgrid.place` in {self.device.source or 'devices.yaml'}")
            if not p.acquired:
                try:
                    c.acquire(name)
                    return name
                except _RpcRefused as exc:
                    now = c.place(name)
                    if exc.code != "FAILED_PRECONDITION" or now is None or not now.acquired:
                        # Not a race with another holder: e.g. a resource is taken by another place.
                        raise LabgridError(
                            f"{self._where()}: the coordinator refused to acquire it ({exc.details}); check "
                            f"`labgrid-client -p {name} show` and the lab host's exporter") from None
                    p = now  # taken meanwhile: wait for whoever has it now
            if p.left_by_dead_run(c.me):
                c.release_dead_runs(say)
                continue
            who = p.describe_holder()
            if cancel is not None and cancel.is_set():
                raise DeviceBusy(f"{self._where()}: stopped while waiting for the place held by {who}")
            if time.monotonic() >= deadline:
                raise DeviceBusy(f"{self._where()}: in use by {who}; skipped after waiting {wait_s:.0f} s. "
                                 "Wait for them to release it (`labgrid-client -p "
                                 f"{name} release`) or raise `locks.wait_s` in the plan")
            if not told:
                say(f"{self._where()}: in use by {who}; waiting up to {wait_s:.0f} s")
                told = True
            _sleep(cancel, _POLL_S)

    def _acquire_reserved(self, c: Coordinator, deadline: float, wait_s: float, say: SayFn,
                          cancel: threading.Event | None) -> str:
        tags = dict(self.spec.tags)
        self._token = c.create_reservation(tags, self.spec.prio)
        told = False
        try:
            while True:
                state, place = c.poll_reservation(self._token)
                if state == "allocated" and place:
                    try:
                        c.acquire(place)
                        return place
                    except _RpcRefused as exc:
                        raise LabgridError(f"{self._where()}: reservation {self._token} got place {place} but "
                                           f"acquiring it failed: {exc.details}") from None
                if state in ("expired", "invalid"):
                    raise LabgridError(f"{self._where()}: reservation {self._token} became {state}; run again")
                holders = [p for p in c.places() if set(tags.items()) <= set(p.tags.items())]
                if not holders:
                    raise LabgridError(f"{self._where()}: no place carries the tags "
                                       f"{' '.join(f'{k}={v}' for k, v in tags.items())}; tag the device's place "
                                       "(`labgrid-client -p NAME set-tags key=value`) or fix `labgrid.tags`")
                who = "; ".join(f"{p.name}: {p.describe_holder()}" for p in holders)
                if cancel is not None and cancel.is_set():
                    raise DeviceBusy(f"{self._where()}: stopped while waiting for reservation {self._token} ({who})")
                if time.monotonic() >= deadline:
                    raise DeviceBusy(f"{self._where()}: every matching place is in use ({who}); skipped after "
                                     f"waiting {wait_s:.0f} s. Raise `locks.wait_s` in the plan to wait longer")
                if not told:
                    say(f"{self._where()}: waiting up to {wait_s:.0f} s for reservation {self._token} ({who})")
                    told = True
                _sleep(cancel, _POLL_S)
        except BaseException:
            self._cancel_reservation(c)
            raise

    # ---- release and status -------------------------------------------------------------
    def _cancel_reservation(self, c: Coordinator) -> None:
        token, self._token = self._token, None
        if token:
            try:
                c.cancel_reservation(token)
            except LabgridError:
                pass  # expired already, or the coordinator is gone (it then drops it itself)

    def release(self) -> None:
        name, self._place = self._place, None
        c = self._coordinator() if (name or self._token) else None
        if c is None:
            return
        if name:
            p = c.place(name)
            # Ours only while it is still held by us for this run: never someone else's hold.
            if p is not None and p.acquired == c.me and p.harness_run in (None, tag_value(self.run_id)):
                try:
                    c.release(name, holder=c.me)
                except _RpcRefused:
                    pass  # released meanwhile
            if p is not None and p.harness_run == tag_value(self.run_id):
                c.forget_run(dataclasses.replace(p, tags={k: v for k, v in p.tags.items() if k != TAG_TOKEN}))
        self._cancel_reservation(c)

    def peek_address(self) -> DeviceSpec:
        """The address the device's place publishes, without claiming it (`lab status`'s
        read-only health check). A reservation's device has no fixed place: unchanged."""
        if self.spec.place is None:
            return self.device
        c = self._coordinator()
        return resolve_address(self.device, self.spec.place, c.resources(self.spec.place))

    def holder(self) -> str | None:
        """Who holds the place now (None: free). For a reservation, the matching places."""
        c = self._coordinator()
        if self.spec.place is not None:
            p = c.place(self.spec.place)
            return None if p is None or not p.acquired else p.describe_holder()
        tags = set(self.spec.tags)
        held = [p for p in c.places() if tags <= set(p.tags.items()) and p.acquired]
        return "; ".join(f"{p.name}: {p.describe_holder()}" for p in held) or None


def _sleep(cancel: threading.Event | None, seconds: float) -> None:
    if cancel is not None:
        cancel.wait(seconds)
    else:
        time.sleep(seconds)


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
