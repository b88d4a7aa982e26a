"""The ExecuTorch suite's input (harness/suite/executorch/input.py, built as the night's job builds
it): its `--model-dir` and the runner of the device's lane. Without `--model-dir` the default
folder comes from ../shared: on an emulated HTP (`htp: emulator`) the host QNN material
(et-qnn-host: programs per SoC and format, with their CPU references), on the host (no HTP)
the tiny XNNPACK llama.

A float reference declared for the folder (--reference-checkpoint, --reference-params,
--reference-tokenizer: what its programs were exported from) is built by the harness as an export
of its own, cached, its testcase `test_export[<folder>-reference]`, and every QNN cell is judged
against it (docs/etllama.md#declaring-the-reference-for-a-folder-pytest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.inventory import DeviceSpec
from harness.plugin import DECLARED_REFERENCE, QUANT_BUDGETS, session_records
from harness.suite.executorch import EtInput, build_et_input

if TYPE_CHECKING:
    from harness.lab.exports import ExportResult



def _shared_models() -> Path:
    """The default material when no --model-dir is given, where tests/shared.py (the one rule for every
    door) finds it. A suite copied out of the checkout has no tests package, so no default material:
    --model-dir says where the exports are."""
    try:
        from tests.shared import SHARED
    except ImportError:
        return Path("(no default material outside the checkout: give --model-dir)")
    return SHARED / "models"


@pytest.fixture(scope="session")
def model_dir(pytestconfig: pytest.Config, device: DeviceSpec) -> Path:
    raw = pytestconfig.getoption("--model-dir", default=None)
    if raw:
        return Path(raw)
    models = _shared_models()
    shared_qnn_host, shared_cpu_export = models / "et-qnn-host", models / "et-tiny-llama-xnnpack"
    if device.emulated:
        if not (shared_qnn_host / "README.md").is_file():
            pytest.skip(f"no --model-dir given and {shared_qnn_host} is absent: an emulated HTP's default programs "
                        "come from ../shared")
        return shared_qnn_host
    if device.has_htp:
        pytest.skip("no --model-dir given: point it at a folder of ExecuTorch exports (one per quant format)")
    if not (shared_cpu_export / "model.pte").is_file():
        pytest.skip(f"no --model-dir given and {shared_cpu_export} is absent: the host lane's default export "
                    "comes from ../shared")
    return shared_cpu_export


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """test_export[<folder>-reference], the declared reference's testcase, only when one is declared."""
    if "declared_name" in metafunc.fixturenames:
        raw = metafunc.config.getoption("--model-dir", default=None)
        name = Path(raw).resolve().name if raw else "model"
        declared = DECLARED_REFERENCE in metafunc.config.stash
        metafunc.parametrize("declared_name", [name] if declared else [], ids=[f"{name}-reference"] if declared else [])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """No declared reference: no reference testcase (not an empty parameter set's skip)."""
    if DECLARED_REFERENCE in config.stash:
        return
    dropped = [i for i in items if i.name.startswith("test_export[") and i.path.parent == Path(__file__).parent]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]


@pytest.fixture(scope="session")
def declared_reference(pytestconfig: pytest.Config, device: DeviceSpec, model_dir: Path,
                       tmp_path_factory: pytest.TempPathFactory) -> ExportResult | None:
    """The declared float reference, built (or found in the export cache) once a session."""
    spec = pytestconfig.stash.get(DECLARED_REFERENCE, None)
    if spec is None:
        return None
    from harness.lab.exports import build_declared_reference

    return build_declared_reference(spec, model_dir.resolve().name, tmp_path_factory.mktemp("declared-reference"),
                                    soc=device.soc_model if device.has_htp else None)


@pytest.fixture(scope="session")
def et_input(pytestconfig: pytest.Config, request: pytest.FixtureRequest, transport, model_dir: Path,
             tmp_path_factory: pytest.TempPathFactory, declared_reference: ExportResult | None) -> Iterator[EtInput]:
    given = pytestconfig.getoption("--runtime-dir", default=None)
    sdk = pytestconfig.getoption("--qnn-sdk", default=None)
    inp = build_et_input(transport, model_dir, work=tmp_path_factory.mktemp("et-work"),
                         device_runtime=(lambda: request.getfixturevalue("qnn_runtime")) if given else None,
                         qnn_sdk=Path(sdk) if sdk else None, localize=bool(pytestconfig.getoption("--localize")),
                         expected_cpu_ops=request.getfixturevalue("expected_cpu_ops"),
                         quant_budgets=pytestconfig.stash.get(QUANT_BUDGETS, None),
                         allow_unjudged=bool(pytestconfig.getoption("--allow-unjudged")),
                         export_format=pytestconfig.getoption("--export-format", default=None),
                         reference_dir=declared_reference.folder if declared_reference and declared_reference.ok else None,
                         siblings=lambda: [r for r in session_records(pytestconfig) if r.device == transport.device.name])
    if inp.catalogue.empty:  # a folder with nothing to run is the user's mistake, never "all skipped"
        pytest.exit(f"harness: {inp.catalogue.nothing_to_run()}", returncode=4)
    yield inp
    inp.cleanup()
