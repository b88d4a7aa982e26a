"""The ExecuTorch suite's fixtures: its exports (one folder per format, or one export), and the
host lane: on a device without an HTP (`transport: local`, no `soc:`) with no `--runtime-dir`,
the runner is ExecuTorch's real LLM runner on the CPU (`harness.hostrt.executorch`, the
`executorch` extra) and the default export is the shared tiny XNNPACK llama."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.inventory import DeviceSpec
from harness.provision.artifacts import load_export

SHARED_CPU_EXPORT = Path(__file__).resolve().parents[2].parent / "shared" / "models" / "et-tiny-llama-xnnpack"


def host_lane(pytestconfig: pytest.Config, device: DeviceSpec) -> bool:
    return not device.has_htp and not pytestconfig.getoption("--runtime-dir", default=None)


def executorch_runner_or_skip() -> None:
    try:
        import executorch.extension.llm.runner  # noqa: F401
    except ImportError:
        pytest.skip("the host lane runs ExecuTorch's real LLM runner: the optional `executorch` extra is not "
                    "installed (pip install 'harness[executorch]')")


@pytest.fixture(scope="session")
def model_dir(pytestconfig: pytest.Config, device: DeviceSpec) -> Path:
    raw = pytestconfig.getoption("--model-dir", default=None)
    if raw:
        return Path(raw)
    if device.has_htp:
        pytest.skip("no --model-dir given: point it at a folder of ExecuTorch exports (one per quant format)")
    if not (SHARED_CPU_EXPORT / "model.pte").is_file():
        pytest.skip(f"no --model-dir given and {SHARED_CPU_EXPORT} is absent: the host lane's default export "
                    "comes from ../shared")
    return SHARED_CPU_EXPORT


@pytest.fixture(scope="session")
def et_exports(model_dir: Path) -> dict[str, Path]:
    """Format name -> export folder: the folder itself when it holds a .pte (named `cpu` or
    `qnn` by its content), else each subfolder holding one (named by the folder)."""
    if any(model_dir.glob("*.pte")):
        try:
            qnn = load_export(model_dir).uses_qnn
        except HarnessError as exc:
            pytest.fail(str(exc), pytrace=False)
        return {"qnn" if qnn else "cpu": model_dir}
    if not model_dir.is_dir():
        pytest.fail(f"{model_dir}: not a folder; pass --model-dir a folder of ExecuTorch exports", pytrace=False)
    return {f.name: f for f in sorted(model_dir.iterdir()) if f.is_dir() and any(f.glob("*.pte"))}


@pytest.fixture(scope="session")
def et_runtime(pytestconfig: pytest.Config, request: pytest.FixtureRequest, transport, device: DeviceSpec,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The runner on the device: `--runtime-dir`'s qnn_llama_runner (the plugin's qnn_runtime),
    or on the host ExecuTorch's real LLM runner behind qnn_llama_runner's flags."""
    if not host_lane(pytestconfig, device):
        yield request.getfixturevalue("qnn_runtime")
        return
    executorch_runner_or_skip()
    from harness.hostrt.executorch import make_runtime_dir
    from harness.provision import provision_runtime

    folder = make_runtime_dir(tmp_path_factory.mktemp("et-host-runtime"))
    yield provision_runtime(transport, folder, need_qnn=False)
