"""The ExecuTorch suite's input (harness/suite/executorch/input.py, built as the night's job builds
it): its `--model-dir` and the runner of the device's lane. Without `--model-dir` the default
folder comes from ../shared: on an emulated HTP (`htp: emulator`) the host QNN material
(et-qnn-host: programs per SoC and format, with their CPU references), on the host (no HTP)
the tiny XNNPACK llama."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.inventory import DeviceSpec
from harness.plugin import QUANT_BUDGETS, session_records
from harness.suite.executorch import EtInput, build_et_input
from tests.shared import SHARED

# $HARNESS_SHARED_DIR, else ../shared beside the checkout (tests/shared.py decides it for every door)
SHARED_MODELS = SHARED / "models"
SHARED_CPU_EXPORT = SHARED_MODELS / "et-tiny-llama-xnnpack"
SHARED_QNN_HOST = SHARED_MODELS / "et-qnn-host"


@pytest.fixture(scope="session")
def model_dir(pytestconfig: pytest.Config, device: DeviceSpec) -> Path:
    raw = pytestconfig.getoption("--model-dir", default=None)
    if raw:
        return Path(raw)
    if device.emulated:
        if not (SHARED_QNN_HOST / "README.md").is_file():
            pytest.skip(f"no --model-dir given and {SHARED_QNN_HOST} is absent: an emulated HTP's default programs "
                        "come from ../shared")
        return SHARED_QNN_HOST
    if device.has_htp:
        pytest.skip("no --model-dir given: point it at a folder of ExecuTorch exports (one per quant format)")
    if not (SHARED_CPU_EXPORT / "model.pte").is_file():
        pytest.skip(f"no --model-dir given and {SHARED_CPU_EXPORT} is absent: the host lane's default export "
                    "comes from ../shared")
    return SHARED_CPU_EXPORT


@pytest.fixture(scope="session")
def et_input(pytestconfig: pytest.Config, request: pytest.FixtureRequest, transport, model_dir: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtInput]:
    given = pytestconfig.getoption("--runtime-dir", default=None)
    sdk = pytestconfig.getoption("--qnn-sdk", default=None)
    inp = build_et_input(transport, model_dir, work=tmp_path_factory.mktemp("et-work"),
                         device_runtime=(lambda: request.getfixturevalue("qnn_runtime")) if given else None,
                         qnn_sdk=Path(sdk) if sdk else None, localize=bool(pytestconfig.getoption("--localize")),
                         expected_cpu_ops=request.getfixturevalue("expected_cpu_ops"),
                         quant_budgets=pytestconfig.stash.get(QUANT_BUDGETS, None),
                         allow_unjudged=bool(pytestconfig.getoption("--allow-unjudged")),
                         export_format=pytestconfig.getoption("--export-format", default=None),
                         siblings=lambda: [r for r in session_records(pytestconfig) if r.device == transport.device.name])
    if inp.catalogue.empty:  # a folder with nothing to run is the user's mistake, never "all skipped"
        pytest.exit(f"harness: {inp.catalogue.nothing_to_run()}", returncode=4)
    yield inp
    inp.cleanup()
