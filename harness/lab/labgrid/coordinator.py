"""A live gRPC session with a labgrid coordinator (reading places, acquiring, tagging,
reservations, sweeping places dead runs left) and the process's one registry of them.

labgrid's client is asyncio + gRPC: one `ClientSession` per coordinator per process, run on
its own event-loop thread (see the package doc)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from harness.errors import HarnessError
from harness.lab.labgrid.imports import LabgridError, import_labgrid_client
from harness.lab.labgrid.places import HARNESS_TAGS, TAG_PID, TAG_TOKEN, PlaceResource, PlaceState, identity, process_alive

T = TypeVar("T")
SayFn = Callable[[str], None]

_CALL_TIMEOUT_S = 30.0




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
        from labgrid.remote.client import ClientSession  # optional extra (see _running_loop)

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
        except HarnessError:
            raise
        except Exception as exc:
            if not _coordinator_fault(exc):
                raise
            # The session's stream broke (coordinator killed or restarted): a lab fault.
            raise LabgridError(f"labgrid coordinator {self.address} went away ({type(exc).__name__}: "
                               f"{_details(exc)}); check that it runs, then run again") from None

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

    async def _call(self, what: str, rpc: str, request: object) -> Any:
        import grpc  # optional extra (see _running_loop)

        session = self._live(what)
        try:
            response = await getattr(session.stub, rpc)(request)
            await session.sync_with_coordinator()  # our own view includes the change
            return response
        except grpc.aio.AioRpcError as exc:
            code = exc.code().name
            if code in ("UNAVAILABLE", "CANCELLED", "DEADLINE_EXCEEDED"):  # the link, not a refusal
                raise LabgridError(f"labgrid coordinator {self.address} went away during {what} "
                                   f"({code}: {exc.details()}); check that it runs, then run again") from None
            raise RpcRefused(code, exc.details() or "") from None

    def _live(self, what: str) -> Any:
        session = self._session
        if session is None or session.stopping.is_set():
            raise LabgridError(f"labgrid coordinator {self.address} went away during {what}; "
                               "check that it runs, then run again")
        return session

    # ---- reading ------------------------------------------------------------------------
    def place(self, name: str) -> PlaceState | None:
        async def read() -> PlaceState | None:
            session = self._live(f"reading place {name}")
            await session.sync_with_coordinator()
            p = session.places.get(name)
            return None if p is None else _state(p)

        return self._run(read())

    def places(self) -> list[PlaceState]:
        async def read() -> list[PlaceState]:
            session = self._live("reading places")
            await session.sync_with_coordinator()
            return [_state(p) for p in session.places.values()]

        return self._run(read())

    def resources(self, place_name: str) -> list[PlaceResource]:
        """The resources a place matches (named as the place's matches rename them)."""
        async def read() -> list[PlaceResource]:
            session = self._live(f"reading the resources of {place_name}")
            place = session.places.get(place_name)
            found: list[PlaceResource] = []
            if place is None:
                return found
            for exporter, groups in session.resources.items():
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
        from labgrid.remote.generated import labgrid_coordinator_pb2  # optional extra (see _running_loop)

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
        return str(self._run(self._call("creating a reservation", "CreateReservation", request)).reservation.token)

    def poll_reservation(self, token: str) -> tuple[str, str | None]:
        """(state name, allocated place or None); polling also keeps the reservation alive."""
        from labgrid.remote.common import Reservation  # optional extra (see _running_loop)

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
                    except RpcRefused:
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
        ours = {k: "" for k in HARNESS_TAGS if k in p.tags}
        try:
            if ours:
                self.set_tags(p.name, ours)
            if p.tags.get(TAG_TOKEN):
                self.cancel_reservation(p.tags[TAG_TOKEN].upper())  # labgrid tokens are A-Z0-9
        except RpcRefused:
            pass  # the place was deleted or the reservation expired meanwhile


def _coordinator_fault(exc: BaseException) -> bool:
    """A broken link to the coordinator (gRPC's errors, a reset socket, a cancelled call)."""
    from concurrent.futures import CancelledError

    return isinstance(exc, (OSError, CancelledError, asyncio.CancelledError)) \
        or type(exc).__module__.split(".")[0] == "grpc"


def _details(exc: BaseException) -> str:
    details = getattr(exc, "details", None)
    return str(details() if callable(details) else exc) or type(exc).__name__


class RpcRefused(LabgridError):
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
            import_labgrid_client()  # a clear error when absent or on a protobuf mismatch
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
