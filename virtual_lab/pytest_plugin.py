"""pytest fixtures for the harness's own tests: a virtual lab started once per session,
and a factory for tests that need their own (to break devices without hurting others)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from virtual_lab.lab import LabDeviceConfig, VirtualLab


@pytest.fixture(scope="session")
def vlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualLab]:
    """The default lab (oneplus13 SM8750, sm8650-qrd SM8650 over adb; sa8295-car over ssh).
    Shared by the session: tests must not leave faults switched on."""
    lab = VirtualLab(tmp_path_factory.mktemp("vlab"))
    lab.start()
    yield lab
    lab.stop()


@pytest.fixture
def vlab_factory(tmp_path: Path) -> Iterator[Callable[..., VirtualLab]]:
    """`vlab_factory(devices=[LabDeviceConfig(...)])` starts a private lab, stopped after the test."""
    labs: list[VirtualLab] = []

    def make(devices: Sequence[LabDeviceConfig] | None = None) -> VirtualLab:
        lab = VirtualLab(tmp_path / f"lab{len(labs)}", devices)
        labs.append(lab)
        return lab.start()

    yield make
    for lab in reversed(labs):
        lab.stop()


@pytest.fixture
def vlab_transport(vlab: VirtualLab):
    """`vlab_transport("oneplus13")` opens a harness transport to a device of the shared lab."""
    from harness.transport import open_transport

    opened = []

    def make(name: str):
        t = open_transport(vlab.inventory.get(name))
        opened.append(t)
        return t

    yield make
    for t in opened:
        t.close()
