"""The registry of transport kinds (harness/inventory/model.py's TransportKind is the contract):
a kind registers itself once in `KINDS`, as labgrid's factory registers a driver class, which
checks it against the contract at once, as Mobly checks each controller module; every consumer
finds it there (devices.yaml's `transport:`, `harness devices`, `lab status`, opening)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TypeVar

from harness.inventory.model import TransportKind

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_OPENER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


K = TypeVar("K", bound=TransportKind)


def check_contract(kind: TransportKind) -> None:
    """A kind's class facts checked once, at registration: a broken kind fails where it is written."""
    name = getattr(kind, "name", None)
    if not isinstance(name, str) or not _NAME.match(name):
        raise TypeError(f"{type(kind).__name__}.name must be a lower-case word (devices.yaml's `transport:`), "
                        f"got {name!r}")
    if not isinstance(kind.keys, frozenset) or not all(isinstance(k, str) for k in kind.keys):
        raise TypeError(f"transport kind {name}: keys must be a frozenset of devices.yaml keys")
    opener = getattr(kind, "opener", None)
    if not isinstance(opener, str) or not _OPENER.match(opener):
        raise TypeError(f"transport kind {name}: opener must name its driver as 'module:callable', got {opener!r}")
    if (kind.labgrid_resource is None) != (not kind.labgrid_service):
        raise TypeError(f"transport kind {name}: give labgrid_resource and labgrid_service together")


class KindRegistry:
    """The registered transport kinds by name, in registration order."""

    def __init__(self) -> None:
        self._kinds: dict[str, TransportKind] = {}

    def register(self, kind: K) -> K:
        check_contract(kind)
        if kind.name in self._kinds:
            raise TypeError(f"transport kind {kind.name} is registered twice ({self._kinds[kind.name]!r}, {kind!r})")
        self._kinds[kind.name] = kind
        return kind

    def unregister(self, kind: TransportKind) -> None:
        if self._kinds.get(kind.name) is kind:
            del self._kinds[kind.name]

    def named(self, name: str) -> TransportKind | None:
        return self._kinds.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._kinds)

    def owners(self, key: str) -> tuple[TransportKind, ...]:
        """The kinds that read device key `key`."""
        return tuple(k for k in self._kinds.values() if key in k.keys)

    def device_keys(self) -> frozenset[str]:
        return frozenset().union(*(k.keys for k in self._kinds.values()))

    def __iter__(self) -> Iterator[TransportKind]:
        return iter(tuple(self._kinds.values()))


# The one registry (labgrid's target_factory is one too): built-in kinds register on import of
# harness.inventory.kinds; a kind written elsewhere (a test's) registers itself the same way.
KINDS = KindRegistry()
