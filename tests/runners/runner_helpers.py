"""Fixtures for runner tests: a virtual export + runtime on a device (local host or virtual lab)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness import pairs
from harness.inventory import LOCAL, DeviceSpec
from harness.pairs import BackendPair
from harness.provision import ProvisionedModel, ProvisionedRuntime
from harness.runners.llm_demo import LlmDemoRunner
from harness.transport import LocalTransport, Transport
from virtual_lab.exports import make_qwen3_export, make_qwen3_vl_export
from virtual_lab.runtime import make_runtime_dir

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared"
FIXTURES = REPO / "fixtures" / "llm_demo"

# The provisioning names of the config files for the virtual exports.
TEXT_CONFIGS = dict(pairs.TEXT_CONFIGS)


@dataclass
class Setup:
    transport: Transport
    model: ProvisionedModel
    runtime: ProvisionedRuntime

    def runner(self, **kw: Any) -> LlmDemoRunner:
        return LlmDemoRunner(self.transport, self.runtime, self.model, **kw)


def local_device(work_dir: Path, soc: str = "SM8750") -> LocalTransport:
    from harness import soc as soc_table

    info = soc_table.lookup(soc)
    assert info is not None, f"{soc} is not in the SoC table"
    spec = DeviceSpec(name="local", transport=LOCAL, soc_model=info.model, soc_id=info.soc_id,
                      htp_arch=info.htp_arch, vtcm_mb=info.vtcm_mb, work_dir=str(work_dir))
    return LocalTransport(spec)


def install(transport: Transport, host_root: Path, *, arch: str = "v79", visual: bool = False,
            logcat_only: bool = False, with_qnn_libs: bool = True, remote_root: str | None = None,
            **export_knobs: Any) -> Setup:
    """Write a virtual export and runtime on the host and push them to the device work dir."""
    export_dir = host_root / "export"
    runtime_dir = host_root / "runtime"
    make = make_qwen3_vl_export if visual else make_qwen3_export
    info = make(export_dir, size_mb=1, **export_knobs)
    make_runtime_dir(runtime_dir, arch, logcat_only=logcat_only, with_qnn_libs=with_qnn_libs)
    work = remote_root or transport.device.work_dir
    remote_model = posixpath.join(work, "models", "m")
    remote_rt = posixpath.join(work, "runtime")
    if transport.kind == "local" and Path(remote_model).exists():
        import shutil

        shutil.rmtree(remote_model)
    transport.push_tree(export_dir, remote_model)
    transport.push_tree(runtime_dir, remote_rt)
    transport.shell(["chmod", "755", posixpath.join(remote_rt, "llm_demo")], timeout=30, check=True)
    names = dict(TEXT_CONFIGS) if not visual else dict(info.configs)
    model = ProvisionedModel(device=transport.device.name, remote_dir=remote_model, kind="mnn",
                             model_type=info.model_type,
                             configs={BackendPair.parse(p): c for p, c in names.items()})
    runtime = ProvisionedRuntime(device=transport.device.name, remote_dir=remote_rt,
                                 runner=posixpath.join(remote_rt, "llm_demo"),
                                 lib_dirs=(remote_rt,), adsp_dirs=(remote_rt,), htp_arch=arch)
    return Setup(transport, model, runtime)


@pytest.fixture
def local_setup(tmp_path: Path):
    """A local 'device' (the host) whose SoC the virtual runtime learns from VLAB_SOC_MODEL."""
    transport = local_device(tmp_path / "device")

    def make(**kw: Any) -> Setup:
        return install(transport, tmp_path / "host", **kw)

    return make


# The local host has no getprop: tell the virtual runtime which SoC it runs on.
SM8750_ENV = {"VLAB_SOC_MODEL": "SM8750"}
