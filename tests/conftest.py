"""Fixtures for the harness's own tests: the virtual lab (real adb server, emulated adbd
devices, real sshd), started on free 127.0.0.1 ports and stopped at the end."""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from localize_kit import (
    BUILD_BUDGET_S,
    DEBUG,
    DEBUG_FAULT,
    MODEL,
    MODEL_FAULT,
    DecoderBuilds,
    needed_by,
    run_build_dir,
    uses_a_lowering,
)

from virtual_lab.pytest_plugin import vlab, vlab_factory, vlab_transport  # noqa: F401
from virtual_lab.qnn_cache import VLAB_CACHE_ENV

# Property tests: the same examples on every run by default, so a CI verdict is the tree's,
# not the dice's (a random run once failed CI on a bug it had just found; that example is now
# pinned with @example). Hunting for new ones is deliberate:
#   pytest --hypothesis-profile=fuzz --timeout=0 tests/provision/test_sync_names.py
for _name, _examples, _fixed in (("ci", 25, True), ("fuzz", 1500, False)):
    settings.register_profile(_name, max_examples=_examples, derandomize=_fixed, deadline=None, database=None,
                              suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    """The project environment's console scripts (labgrid-coordinator, -exporter, -client) on PATH,
    as an activated environment has them: `make test` runs .venv/bin/python without activating it,
    and the labgrid tests skipped there for want of them."""
    bindir = os.path.dirname(os.path.abspath(sys.executable))
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


# pytest plugins of the project environment that the suites' own runs never use (labgrid's, hydra's,
# hypothesis's ... pulled in by the dev and executorch extras): loading them cost each child pytest the
# tests start (suites/qwen3_vl, suites/executorch_qnn; ~40 a run) ~3 s of CPU, ~1.5 s left without.
CHILD_PYTEST_OFF = ("labgrid", "hydra_pytest", "hypothesispytest", "kgb", "anyio")


@pytest.fixture(scope="session", autouse=True)
def _lean_child_pytest() -> Iterator[None]:
    """The child pytest runs of the suites load only the plugins they use (PYTEST_ADDOPTS, which
    this session read before the fixture set it)."""
    mp = pytest.MonkeyPatch()
    off = " ".join(f"-p no:{name}" for name in CHILD_PYTEST_OFF)
    mp.setenv("PYTEST_ADDOPTS", f"{os.environ.get('PYTEST_ADDOPTS', '')} {off}".strip())
    yield
    mp.undo()


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests never write the developer's own cache folder (~/.cache/harness): the hashes, QNN's
    reads and build ids of a session stay in its temp folder, shared with its child processes.
    The virtual lab's real programs (virtual_lab.qnn_cache) are the run's, whatever cache a test
    gives the harness: a test with a cache folder of its own lowered them again (~25 s of CPU each)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("HARNESS_CACHE_DIR", str(tmp_path_factory.mktemp("harness-cache")))
    mp.setenv(VLAB_CACHE_ENV, str(run_build_dir(request.config, tmp_path_factory) / "vlab-cache"))
    yield
    mp.undo()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that may build the session's example-decoder lowerings (its fixture's setup does) gets
    their time budget, whichever of them runs first. Then the files in the order that keeps both
    xdist workers busy (`--dist loadfile` hands out files in this order)."""
    for item in items:
        mark = item.get_closest_marker("timeout")
        if uses_a_lowering(item) and (mark is None or (mark.args and 0 < mark.args[0] < BUILD_BUDGET_S)):
            item.add_marker(pytest.mark.timeout(BUILD_BUDGET_S), append=False)
    items[:] = _busy_order(items)


def _busy_order(items: list[pytest.Item]) -> list[pytest.Item]:
    """One file that uses the lowerings first (its setup builds them all, minutes of one core), the
    slow files next (the other worker's while the build runs), then the other lowering files (built by
    then: none waits on the build's lock), the quick ones last to even out the end."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    lowering = [f for f, its in files.items() if any(uses_a_lowering(i) for i in its)]
    slow = {f for f, its in files.items() if any(i.get_closest_marker("slow") for i in its)}

    def rank(name: str) -> int:
        if lowering and name == lowering[0]:
            return 0
        return 2 if name in lowering else (1 if name in slow else 3)

    return [item for name in sorted(files, key=rank) for item in files[name]]


# ---- The example decoder's real lowerings, made once per run (tests/localize_kit says how a new
# test adds one): every test that needs a lowering of examples/et_qnn's exporter takes it from here.
@pytest.fixture(scope="session")
def example_decoders(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> DecoderBuilds:
    """The run's lowerings; the first one asked for builds all those the selected tests need, in one child."""
    return DecoderBuilds(run_build_dir(request.config, tmp_path_factory) / "example-decoders", needed_by(request.session.items))


@pytest.fixture(scope="session")
def localize_debug_export(example_decoders: DecoderBuilds) -> Path:
    """The debug build (2-layer SwiGLU decoder, SM8650, 16a8w); skips without the qnn extra."""
    return example_decoders.path(DEBUG)


@pytest.fixture(scope="session")
def localize_fault_export(example_decoders: DecoderBuilds) -> Path:
    """The same debug build with the seed fault planted at layer 1."""
    return example_decoders.path(DEBUG_FAULT)


@pytest.fixture(scope="session")
def float_reference_exports(example_decoders: DecoderBuilds) -> dict[str, Path]:
    """The program with its float reference (model.pte, reference/, ...; the same model), healthy and
    with the seed fault planted at layer 1 by plant_fault.py: {"healthy": model_dir, "faulty": model_dir},
    each a --model-dir with one 16a8w/ export."""
    return {"healthy": example_decoders.path(MODEL).parent, "faulty": example_decoders.path(MODEL_FAULT).parent}
