"""pytest plugin (registered through the `pytest11` entry point): options, markers and
fixtures only. All logic lives in importable modules; this file wires them to pytest.

What the plugin keeps about a test lives in pytest's own places: `item.stash` under the
StashKeys below (pytest's report of the test, the verdict a suite check decided), markers for
what a test needs (`requires_arch`) and which suite check it is (`suite_check`)."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from harness.checks import QuantBudget
from harness.errors import HarnessError
from harness.evidence import Provenance, Timing, parse_expected_cpu_ops
from harness.inventory import DeviceSpec, Inventory, load_inventory
from harness.outcomes import FailureClass
from harness.pairs import BackendPair, PairError
from harness.report import RecordWriter, TestRecord
from harness.verdict import Verdict

if TYPE_CHECKING:
    from harness.lab.plan import ReferenceSpec
    from harness.provision import ModelArtifact, ProvisionedModel, ProvisionedRuntime
    from harness.transport import Transport


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "on-device LLM harness")
    group.addoption("--device", action="store", default=None, help="device name from the inventory")
    group.addoption("--devices-file", action="store", default=None,
                    help="inventory file (default: $HARNESS_DEVICES or ./devices.yaml)")
    group.addoption("--model-dir", action="store", default=None, help="exported model folder to provision")
    group.addoption("--runtime-dir", action="store", default=None,
                    help="folder with the runner binary (llm_demo / qnn_llama_runner) and its libraries")
    group.addoption("--qnn-sdk", action="store", default=None, help="QNN SDK root (QNN libraries by HTP arch)")
    group.addoption("--backends", action="store", default=None,
                    help="comma-separated backend pairs (visual/llm), e.g. qnn/qnn,cpu/cpu (default: all)")
    group.addoption("--checks", action="store", default=None,
                    help="comma-separated checks or groups of the suite to run, e.g. static or "
                         "export_shapes,runtime_shape_guards (default: all; harness/suite/registry.py)")
    group.addoption("--localize", action="store_true", default=False,
                    help="ExecuTorch suite: localize every format's program per op, not only a failed cell's "
                         "(needs the export's debug build: docs/localize.md)")
    group.addoption("--expect-cpu-ops", action="store", default=None,
                    help="ops a QNN cell may run on the CPU beyond the suite's own, as op=calls,op "
                         "(e.g. dim_order_ops::_to_dim_order_copy=2 or Attention=30; docs/placement.md)")
    group.addoption("--quant-budget", action="append", default=[], metavar="FORMAT:kl=X,nll_gap=Y",
                    help="ExecuTorch suite: a quantization format's quality budget against its float model "
                         "(repeatable; docs/executorch-reference.md#the-verdict), e.g. 16a4w:kl=0.1,nll_gap=0.3")
    group.addoption("--allow-unjudged", action="store_true", default=False,
                    help="ExecuTorch suite: a run whose QNN cells were all skipped for want of a reference or a "
                         "debug build passes (its `judged` testcase skips, saying what was not judged)")
    group.addoption("--export-format", action="store", default=None, metavar="FORMAT",
                    help="ExecuTorch suite: the quant format (16a4w, 16a8w, 8a8w, ...) of a lone QNN export whose "
                         "records name none (docs/executorch-reference.md#a-foreign-exports-format)")
    group.addoption("--reference-checkpoint", action="store", default=None, metavar="FILE",
                    help="ExecuTorch suite: declare --model-dir's float reference: the llama checkpoint its programs "
                         "were exported from; with --reference-params and --reference-tokenizer the harness builds "
                         "the reference itself, cached (test_export[NAME-reference]; docs/etllama.md)")
    group.addoption("--reference-params", action="store", default=None, metavar="FILE",
                    help="ExecuTorch suite: the params.json of --reference-checkpoint")
    group.addoption("--reference-tokenizer", action="store", default=None, metavar="FILE",
                    help="ExecuTorch suite: the tokenizer the programs were exported with (tokenizer.json)")
    group.addoption("--reference-new-tokens", action="store", type=int, default=None, metavar="N",
                    help="ExecuTorch suite: the float model's greedy tokens per prompt in the declared reference "
                         "(default 16; fewer: a cheaper judgement)")
    group.addoption("--reference-prompts", action="store", default=None, metavar="FILE",
                    help="ExecuTorch suite: the declared reference's prompts, one a line (default: the suite's three)")
    group.addoption("--harness-records", action="store", default=None,
                    help="append one JSON record per device test to this file")
    group.addoption("--lock-dir", action="store", default=None,
                    help="device claim folder (default: $HARNESS_LOCK_DIR, else locks/ beside devices.yaml)")
    group.addoption("--lock-timeout", action="store", type=float, default=600.0,
                    help="seconds to wait for a run holding --device before giving up (exit 1)")


EXPECTED_CPU_OPS = pytest.StashKey[dict[str, int]]()  # --expect-cpu-ops, read in pytest_configure
QUANT_BUDGETS = pytest.StashKey[dict[str, QuantBudget]]()  # --quant-budget, read in pytest_configure
DECLARED_REFERENCE: pytest.StashKey[ReferenceSpec] = pytest.StashKey()  # --reference-*, read in pytest_configure
_REFERENCE_FILES = ("--reference-checkpoint", "--reference-params", "--reference-tokenizer")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires_arch(arch): needs an HTP arch at least this new, e.g. 'v73'")
    config.addinivalue_line("markers", "visual: needs a model with a visual encoder")
    config.addinivalue_line("markers", "qnn: runs on the QNN/HTP backend")
    config.addinivalue_line("markers", "suite_check(name): the suite check this test decides (harness/suite/)")
    raw = _opt(config, "--expect-cpu-ops")
    if raw is not None:  # read before any test: a typo is a usage error (exit 4), never a quiet default
        try:
            config.stash[EXPECTED_CPU_OPS] = parse_expected_cpu_ops(raw)
        except ValueError as exc:
            raise pytest.UsageError(f"--expect-cpu-ops {raw!r} {exc}; write it as op=calls,op (an op alone: once)") \
                from None
    fmt = _opt(config, "--export-format")
    if fmt is not None:
        from harness.runners import QUANT_FORMATS

        if fmt not in QUANT_FORMATS:
            raise pytest.UsageError(f"--export-format {fmt!r} is not a quant format ({', '.join(QUANT_FORMATS)})")
    _declared_reference(config)
    budgets = config.getoption("--quant-budget", default=None)
    if budgets:
        from harness.checks import parse_budget_option
        from harness.runners import QUANT_FORMATS

        try:
            config.stash[QUANT_BUDGETS] = parse_budget_option(budgets, QUANT_FORMATS)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None


def _declared_reference(config: pytest.Config) -> None:
    """--reference-checkpoint/-params/-tokenizer: all three or none, each an existing file."""
    given = {name: _opt(config, name) for name in _REFERENCE_FILES}
    extra = [n for n in ("--reference-new-tokens", "--reference-prompts") if _opt(config, n) is not None]
    if not any(given.values()):
        if extra:
            raise pytest.UsageError(f"{', '.join(extra)} without {' '.join(_REFERENCE_FILES)}: declare the reference's "
                                    "checkpoint, params and tokenizer too")
        return
    missing = [name for name, value in given.items() if not value]
    if missing:
        raise pytest.UsageError(f"a declared float reference needs {', '.join(missing)} too ({' '.join(_REFERENCE_FILES)}: "
                                "the checkpoint, params and tokenizer the programs were exported from)")
    for name in (*_REFERENCE_FILES, "--reference-prompts"):
        value = _opt(config, name)
        if value is not None and not Path(value).is_file():
            raise pytest.UsageError(f"{name} {value}: no such file")
    new_tokens = config.getoption("--reference-new-tokens", default=None)
    if new_tokens is not None and new_tokens < 1:
        raise pytest.UsageError(f"--reference-new-tokens {new_tokens}: must be at least 1")
    from harness.lab.plan import ReferenceSpec

    prompts = _opt(config, "--reference-prompts")
    checkpoint, params, tokenizer = (Path(str(given[n])).resolve() for n in _REFERENCE_FILES)
    config.stash[DECLARED_REFERENCE] = ReferenceSpec(checkpoint, params, tokenizer, new_tokens=new_tokens or 16,
                                                     prompts=Path(prompts).resolve() if prompts else None)


@pytest.fixture(autouse=True)
def _requires_arch(request: pytest.FixtureRequest) -> None:
    """A `requires_arch` test on a device whose HTP is older (or absent) is skipped."""
    marker = request.node.get_closest_marker("requires_arch")
    if marker is None or "device" not in request.fixturenames:
        return
    from harness.soc import normalize_arch

    need = normalize_arch(marker.args[0]) if marker.args else None
    if need is None:
        raise pytest.UsageError(f"{request.node.nodeid}: requires_arch needs an arch like 'v73', got {marker.args!r}")
    device: DeviceSpec = request.getfixturevalue("device")
    if not device.has_htp:
        pytest.skip(f"{device.name} is the host (soc: host): no HTP; this test needs {need} or newer")
    if device.arch_number < int(need[1:]):
        pytest.skip(f"{device.name} has HTP {device.htp_arch}; this test needs {need} or newer")


def _opt(config: pytest.Config, name: str) -> str | None:
    value = config.getoption(name, default=None)
    return None if value is None else str(value)


@pytest.fixture(scope="session")
def inventory(pytestconfig: pytest.Config) -> Inventory:
    path = _opt(pytestconfig, "--devices-file") or os.environ.get("HARNESS_DEVICES") or "devices.yaml"
    try:
        return load_inventory(path)
    except HarnessError as exc:
        pytest.exit(str(exc), returncode=2)


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config, inventory: Inventory) -> DeviceSpec:
    name = _opt(pytestconfig, "--device")
    if not name:
        pytest.skip("no --device given: device tests need `--device NAME` from the inventory")
    try:
        return inventory.get(name)
    except HarnessError as exc:
        pytest.exit(str(exc), returncode=2)


@pytest.fixture(scope="session")
def claimed_device(pytestconfig: pytest.Config, inventory: Inventory, device: DeviceSpec) -> Iterator[DeviceSpec]:
    """The session holds the device's claim (harness/lab/claims.py) while it uses it, so a
    night or a push never runs on it at the same time. Gives up after --lock-timeout."""
    from harness.lab import DeviceBusy, claim_dir, open_claim

    claim = open_claim(device, lock_dir=claim_dir(inventory, None, _opt(pytestconfig, "--lock-dir")),
                       run_id=f"pytest-{os.getpid()}", purpose="pytest")
    try:
        spec = claim.acquire(float(_opt(pytestconfig, "--lock-timeout") or 0), say=lambda m: print(m, flush=True))
    except DeviceBusy as exc:
        pytest.exit(str(exc), returncode=1)
    except HarnessError as exc:  # the claim engine's own fault (e.g. a labgrid coordinator down)
        pytest.exit(f"{device.name}: could not be claimed: {exc}", returncode=1)
    try:
        yield spec
    finally:
        claim.release()


@pytest.fixture(scope="session")
def transport(claimed_device: DeviceSpec) -> Iterator[object]:
    from harness.transport import open_transport

    device = claimed_device
    t = open_transport(device)
    health = t.health()
    if not health.ok:
        pytest.exit(f"{device.name} is not healthy: {'; '.join(health.problems) or health.state}", returncode=3)
    yield t
    t.tidy()
    t.close()


@pytest.fixture(scope="session")
def backends(pytestconfig: pytest.Config) -> list[BackendPair] | None:
    raw = _opt(pytestconfig, "--backends")
    try:
        return [BackendPair.parse(b) for b in raw.split(",") if b.strip()] if raw else None
    except PairError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture(scope="session")
def expected_cpu_ops(pytestconfig: pytest.Config) -> dict[str, int] | None:
    """--expect-cpu-ops: CPU ops a QNN cell may run beyond the suite's (None: the suite's alone)."""
    return pytestconfig.stash.get(EXPECTED_CPU_OPS, None)


@pytest.fixture(scope="session")
def model_dir(pytestconfig: pytest.Config) -> Path:
    raw = _opt(pytestconfig, "--model-dir")
    if not raw:
        pytest.skip("no --model-dir given: point it at an exported model folder")
    return Path(raw)


def setup_error(message: str) -> NoReturn:
    """A configuration problem every later test would repeat: said once, and the session stops
    (as for a bad inventory), instead of one identical ERROR per test. Exit 4: a usage or
    input error (harness/lab/exitcodes.py)."""
    from harness.lab import ExitCode

    pytest.exit(message, returncode=int(ExitCode.USAGE_ERROR))


def qnn_needed(device: DeviceSpec, configs: Mapping[BackendPair, str] | None,
               wanted: Sequence[BackendPair] | None) -> bool:
    """QNN libraries are needed only when a QNN pair will run: the device has an HTP, and a
    selected pair (--backends, or every pair by default) is QNN and the export has its config.
    `configs` None: not known (a folder of several exports): any selected QNN pair counts."""
    if not device.has_htp or device.emulated:  # an emulated HTP takes no Android QNN library
        return False
    if configs is None:
        return wanted is None or any(p.is_qnn for p in wanted)
    return any(p.is_qnn for p in configs if wanted is None or p in wanted)


@pytest.fixture(scope="session")
def model_export(pytestconfig: pytest.Config) -> ModelArtifact | None:
    """The --model-dir export, read once for the session (its pairs decide whether QNN libraries
    are pushed, and provisioning pushes it). None: no --model-dir, or not one export (e.g. the
    ExecuTorch suite's folder of quant formats); provisioning then reports why."""
    from harness.provision import load_export

    raw = _opt(pytestconfig, "--model-dir")
    try:
        sdk = _opt(pytestconfig, "--qnn-sdk")  # the context binaries then tell the compiled target
        return load_export(Path(raw), qnn_sdk=Path(sdk) if sdk else None) if raw else None
    except HarnessError:
        return None


@pytest.fixture(scope="session")
def qnn_runtime(pytestconfig: pytest.Config, transport: Transport, device: DeviceSpec, backends: Sequence[BackendPair],
                model_export: ModelArtifact | None) -> ProvisionedRuntime:
    """The runner and its libraries (plus the QNN libraries for this device's HTP arch when a
    QNN pair will run), pushed once per session. The CPU pair needs no QNN library."""
    from harness.provision import provision_runtime

    runtime_dir = _opt(pytestconfig, "--runtime-dir")
    if not runtime_dir:
        pytest.skip("no --runtime-dir given: point it at the folder holding llm_demo and its libraries")
    sdk = _opt(pytestconfig, "--qnn-sdk")
    need = qnn_needed(device, model_export.configs if model_export else None, backends)
    try:
        return provision_runtime(transport, Path(runtime_dir), qnn_sdk=Path(sdk) if sdk and device.has_htp else None,
                                 need_qnn=need, qnn_sdk_option="--qnn-sdk")
    except HarnessError as exc:
        setup_error(f"{exc}" + (": select CPU pairs only with --backends to run without them" if need else ""))


@pytest.fixture(scope="session")
def provisioned_model(transport: Transport, model_dir: Path, model_export: ModelArtifact | None) -> ProvisionedModel:
    """The exported model on the device, validated against it and pushed incrementally."""
    from harness.provision import provision_model

    try:
        return provision_model(transport, model_dir, artifact=model_export)
    except HarnessError as exc:
        setup_error(str(exc))


# Every record this session made, in test order: the suites' summary checks (the export's
# verdict) read the testcases that ran before them, as the lab's job reads what it delivered.
SESSION_RECORDS = pytest.StashKey[list[TestRecord]]()


def session_records(config: pytest.Config) -> list[TestRecord]:
    found: list[TestRecord] = config.stash.get(SESSION_RECORDS, [])
    return list(found)


@pytest.fixture(scope="session")
def record_writer(pytestconfig: pytest.Config) -> Iterator[RecordWriter | None]:
    path = _opt(pytestconfig, "--harness-records")
    if not path:
        yield None
        return
    writer = RecordWriter(Path(path))
    yield writer
    writer.close()


# pytest's report of a test's call (or of its setup when that did not pass), for its record.
REPORT = pytest.StashKey[pytest.TestReport]()
# The verdict a suite check decided for this test (suites/support.py); its record holds it already.
DECIDED = pytest.StashKey[Verdict]()


@pytest.fixture
def device_record(request: pytest.FixtureRequest, record_writer: RecordWriter | None,
                  device: DeviceSpec) -> Iterator[TestRecord]:
    """A TestRecord for this test: fields set by the test become JUnit properties and, with
    --harness-records, a JSON line. A suite check's test decided its verdict into the record
    (harness/suite/run.py); any other test's verdict is pytest's outcome of it. When the test
    set none, the duration is its phase's; a test_generation cell records its llm_demo
    process's time, as the lab's record of that cell does."""
    rec = TestRecord(name=request.node.nodeid, suite=request.node.module.__name__, device=device.name,
                     soc_model=device.soc_model, htp_arch=device.htp_arch)
    if device.emulated:
        rec.put(Timing(device.timing))  # its times are the emulator's, not device speed
    rec.put(Provenance(device.tier))  # the tier it ran on; a check that read more (QAIRT, sha256) replaces it
    yield rec
    report = request.node.stash.get(REPORT, None)
    if report is not None:
        rec.duration_s = rec.duration_s or round(report.duration, 3)
        if DECIDED not in request.node.stash:
            rec.set_verdict(verdict_of_report(report))
    for key in ("device", "soc_model", "htp_arch", "backend_pair", "model", "failure_class",
                "prefill_tps", "decode_tps", "verdict"):
        value = getattr(rec, key)
        if value not in ("", None):
            request.node.user_properties.append((key, str(value)))
    from harness.report import extra_properties  # timing, ETDump: as the lab's JUnit writes them

    request.node.user_properties.extend(extra_properties(rec).items())
    request.config.stash.setdefault(SESSION_RECORDS, []).append(rec)
    if record_writer is not None:
        record_writer.write(rec)


def _report_message(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    return str(crash.message).splitlines()[0][:500] if crash is not None else ""


def verdict_of_report(report: pytest.TestReport) -> Verdict:
    """pytest's outcome as a verdict: a failed setup is an error; a failure the test named no
    class for is the assertion's own class (check-failed)."""
    message = _report_message(report)
    if report.skipped:
        return Verdict.skipped(message)
    if report.failed:
        if report.when == "setup":
            return Verdict.error(FailureClass.SETUP_ERROR, message)
        return Verdict.failed(FailureClass.CHECK_FAILED, message)
    return Verdict.passed()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call" or (report.when == "setup" and not report.passed):
        item.stash[REPORT] = report
    return report
