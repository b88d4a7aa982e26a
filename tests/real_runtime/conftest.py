"""Fixtures over MNN's real llm_demo: a build tree made at test time, and the two devices it
runs on in CI: the host as a `local` device (no Qualcomm SoC) and a virtual adb phone whose
sandbox runs the host binary (the host's dynamic loader and libc are mounted there)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.inventory import DeviceSpec, parse_inventory
from harness.provision import ProvisionedModel, ProvisionedRuntime, provision_model, provision_runtime
from harness.runners.llm_demo import LlmDemoRunner
from harness.transport import Transport, open_transport
from tests.real_runtime.realrt import REAL_EXPORT, make_build_tree, real_runtime_or_skip

DEVICES = ("local", "vphone")


@dataclass
class RealSetup:
    device: DeviceSpec
    transport: Transport
    runtime: ProvisionedRuntime
    model: ProvisionedModel
    build_tree: Path

    def runner(self, **kw) -> LlmDemoRunner:
        return LlmDemoRunner(self.transport, self.runtime, self.model, **kw)


@pytest.fixture(scope="session")
def build_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    real_runtime_or_skip()
    return make_build_tree(tmp_path_factory.mktemp("mnn-build") / "build")


def host_device(work_dir: Path) -> DeviceSpec:
    """A `local` device as a user writes it for the host: no `soc:` at all."""
    yaml_path = work_dir.parent / "devices.yaml"
    inv = parse_inventory({"devices": [{"name": "host", "transport": "local", "work_dir": str(work_dir)}]},
                          yaml_path)
    return inv.get("host")


@pytest.fixture(scope="session", params=DEVICES)
def real(request: pytest.FixtureRequest, build_tree: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSetup]:
    """The CPU-only runtime from the build tree and the real export, provisioned on the device."""
    if request.param == "local":
        device = host_device(tmp_path_factory.mktemp("host-device") / "work")
    else:
        device = request.getfixturevalue("vlab").inventory.get("oneplus13")
    transport = open_transport(device)
    try:
        # The CPU pair needs no QNN library (none is given or found here).
        runtime = provision_runtime(transport, build_tree, need_qnn=False)
        # A CPU export records no QNN target: nothing to compare with the SoC.
        model = provision_model(transport, REAL_EXPORT)
        yield RealSetup(device, transport, runtime, model, build_tree)
    finally:
        transport.close()
