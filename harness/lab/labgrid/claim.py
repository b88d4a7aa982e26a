"""The claim engine: acquire a device's labgrid place (named or by reservation), tag it with
this run, resolve the address its resources publish, release only what this claim holds."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

from harness.inventory import DeviceSpec
from harness.lab.labgrid.coordinator import PROCESS_COORDINATORS, Coordinator, Coordinators, RpcRefused, SayFn
from harness.lab.labgrid.imports import LabgridError
from harness.lab.labgrid.places import TAG_PID, TAG_PURPOSE, TAG_RUN, TAG_TOKEN, PlaceResource, process_tag, tag_value
from harness.lab.locks import DeviceBusy, wait_longer

_POLL_S = 0.5
log = logging.getLogger("harness.lab")

# The labgrid resource class that publishes a device's address (docs/labgrid.md).
NETWORK_SERVICE = "NetworkService"


def resolve_address(device: DeviceSpec, place: str, resources: list[PlaceResource]) -> DeviceSpec:
    """The device spec to connect with: host and port from the place's NetworkService."""
    lg = device.labgrid
    assert lg is not None
    found = [r for r in resources if r.name == lg.resource]
    have = ", ".join(f"{r.name} ({r.path})" for r in resources) or "none"
    if not found:
        raise LabgridError(
            f"{device.name}: labgrid place {place} has no resource named {lg.resource} (it has: {have}); "
            f"publish the {device.transport.labgrid_service} in the exporter config "
            f"as `{lg.resource}: {{cls: NetworkService, address: ..., port: ..., username: ...}}` and match it, "
            f"or set `labgrid.resource` in {device.source or 'devices.yaml'}")
    r = found[0]
    if r.cls != NETWORK_SERVICE:
        raise LabgridError(f"{device.name}: resource {r.path} of place {place} is a {r.cls}, not a NetworkService; "
                           "publish the address as a NetworkService")
    if not r.available:
        raise LabgridError(f"{device.name}: resource {r.path} of place {place} is not available (its exporter is "
                           "offline?); check `labgrid-client resources` and the lab host's labgrid-exporter")
    host, port, user = str(r.params.get("address", "")), r.params.get("port"), str(r.params.get("username", ""))
    if not host or not isinstance(port, int):
        raise LabgridError(f"{device.name}: resource {r.path} of place {place} has no address/port ({r.params}); "
                           "fix the exporter config")
    if device.transport.needs_login and not user:
        raise LabgridError(f"{device.name}: resource {r.path} of place {place} has no username; add "
                           f"`username:` (the {device.transport} login) to it in the exporter config")
    return device.transport.from_place(device, host, port, user)


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
    def acquire(self, wait_s: float, *, say: SayFn | None = None,
                cancel: threading.Event | None = None) -> DeviceSpec:
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

    def _acquire_named(self, c: Coordinator, name: str, deadline: float, wait_s: float, say: SayFn | None,
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
                except RpcRefused as exc:
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
                                 f"Wait for that run to end, or {wait_longer(self.purpose)}; see who holds it with "
                                 f"`labgrid-client -p {name} show` and release it only if that run is dead")
            if not told and say is not None:
                say(f"{self._where()}: in use by {who}; waiting up to {wait_s:.0f} s")
                told = True
            _sleep(cancel, _POLL_S)

    def _acquire_reserved(self, c: Coordinator, deadline: float, wait_s: float, say: SayFn | None,
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
                    except RpcRefused as exc:
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
                                     f"waiting {wait_s:.0f} s. Wait for them, or {wait_longer(self.purpose)}")
                if not told and say is not None:
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
        """Give back what this claim holds. Never raises for the coordinator's fault (gone,
        restarted): it warns instead, and the next run of this host+user releases a place
        this run left once this process has ended (`release_dead_runs`)."""
        name, token = self._place, self._token
        if not (name or token):
            return
        try:
            self._release(name)
        except LabgridError as exc:
            self._place = self._token = None
            left = f"place {name}" if name else f"reservation {token}"
            log.warning("%s: could not release labgrid %s: %s; the next run from this host releases it "
                        "(or `labgrid-client -p %s release`)", self.device.name, left, exc, name or "PLACE")

    def _release(self, name: str | None) -> None:
        self._place = None
        c = self._coordinator()
        if name:
            p = c.place(name)
            # Ours only while it is still held by us for this run: never someone else's hold.
            if p is not None and p.acquired == c.me and p.harness_run in (None, tag_value(self.run_id)):
                try:
                    c.release(name, holder=c.me)
                except RpcRefused:
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
