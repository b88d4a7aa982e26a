"""The labgrid half of devices.yaml (docs/labgrid.md): a device's `labgrid:` place or
reservation and the file's top-level `labgrid: {coordinator: HOST:PORT}`, validated as the rest
of the inventory is (harness/inventory/load.py): one error naming file, device and key."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.validation import FailFn, check_keys, parse_host_port, type_name, typed_get

_LABGRID_TOP_KEYS = {"coordinator"}
_LABGRID_DEVICE_KEYS = {"place", "tags", "prio", "resource"}
# labgrid's own rules for place tags (labgrid.remote.common.TAG_KEY/TAG_VAL), checked whole.
_LG_TAG_KEY = re.compile(r"^[a-z][a-z0-9_]+$")
_LG_TAG_VAL = re.compile(r"^[a-z0-9_]+$")


@dataclass(frozen=True)
class LabgridSpec:
    """Where a device's claim and address come from: a place on a labgrid coordinator, named
    or reserved by tags. `resource` is the place's NetworkService giving the address."""

    coordinator: str
    resource: str
    place: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    prio: float = 0.0

    def describe(self) -> str:
        what = f"place {self.place}" if self.place else \
            "reservation " + " ".join(f"{k}={v}" for k, v in self.tags)
        return f"labgrid {what} @ {self.coordinator}"


def parse_labgrid(ctx: FailFn, raw: object, transport: str, default_resource: str | None,
                  coordinator: str | None) -> LabgridSpec:
    """`default_resource`: the resource a place publishes a `transport` device's address with
    (its kind's labgrid_resource); None: labgrid places hold no such device."""
    if default_resource is None:
        raise ctx.fail("labgrid", f"is set on a {transport} device", "labgrid places hold adb and ssh devices only")
    if coordinator is None:
        raise ctx.fail("labgrid", "names a place but the file names no coordinator",
                       "add `labgrid: {coordinator: HOST:PORT}` at the top level of the file")
    if isinstance(raw, str):
        raw = {"place": raw}
    if not isinstance(raw, dict):
        raise ctx.fail("labgrid", f"must be a mapping, got {type_name(raw)}",
                       "write `labgrid: {place: NAME}` or `labgrid: {tags: {key: value}}`")
    check_keys(ctx, "labgrid", raw, _LABGRID_DEVICE_KEYS)
    place = typed_get(ctx, raw, "place", str, label="labgrid.place")
    tags = typed_get(ctx, raw, "tags", dict, label="labgrid.tags")
    if (place is None) == (tags is None):
        raise ctx.fail("labgrid", "needs exactly one of `place` and `tags`",
                       "name the place (`place: op13`) or the reservation tags (`tags: {board: sm8750}`)")
    pairs: list[tuple[str, str]] = []
    for k, v in (tags or {}).items():
        v = str(v) if isinstance(v, (int, str)) and not isinstance(v, bool) else v
        if not isinstance(k, str) or not _LG_TAG_KEY.match(k) or not isinstance(v, str) or not _LG_TAG_VAL.match(v):
            raise ctx.fail("labgrid.tags", f"holds {k!r}: {v!r}, which labgrid does not accept as a tag",
                           "use lower-case keys and values of a-z, 0-9 and _ (keys start with a letter)")
        pairs.append((k, v))
    if tags is not None and not pairs:
        raise ctx.fail("labgrid.tags", "is empty", "give at least one tag the reservation must match")
    prio = typed_get(ctx, raw, "prio", (int, float), label="labgrid.prio", default=0.0)
    if place is not None and "prio" in raw:
        raise ctx.fail("labgrid.prio", "is set for a named place", "prio is for reservations (`tags:`); remove it")
    resource = typed_get(ctx, raw, "resource", str, label="labgrid.resource",
                         default=default_resource)
    return LabgridSpec(coordinator=coordinator, resource=resource, place=place, tags=tuple(sorted(pairs)),
                       prio=float(prio))


def parse_top_labgrid(top: FailFn, raw: object) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise top.fail("labgrid", f"must be a mapping, got {type_name(raw)}",
                       "write `labgrid: {coordinator: HOST:PORT}` (labgrid-coordinator's -l address)")
    check_keys(top, "labgrid", raw, _LABGRID_TOP_KEYS)
    text = typed_get(top, raw, "coordinator", str, label="labgrid.coordinator", required=True,
                     missing_fix="add `coordinator: HOST:PORT` under `labgrid:`")
    host, port = parse_host_port(top, "labgrid.coordinator", text, 20408)  # labgrid's default port
    return f"{host}:{port}"


__all__ = ["LabgridSpec", "parse_labgrid", "parse_top_labgrid"]
