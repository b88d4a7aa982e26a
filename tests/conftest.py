"""Fixtures for the harness's own tests: the virtual lab (real adb server, emulated adbd
devices, real sshd), started on free 127.0.0.1 ports and stopped at the end."""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from virtual_lab.pytest_plugin import vlab, vlab_factory, vlab_transport  # noqa: F401

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


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests never write the developer's own cache folder (~/.cache/harness): the hashes, QNN's
    reads and build ids of a session stay in its temp folder, shared with its child processes."""
    mp = pytest.MonkeyPatch()
    mp.setenv("HARNESS_CACHE_DIR", str(tmp_path_factory.mktemp("harness-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def localize_debug_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example exporter's debug build (2-layer SwiGLU decoder, SM8650, 16a8w), lowered once per
    session for every localization test (tests/localize_kit); skips without the qnn extra."""
    from localize_kit import lower_debug_program

    return lower_debug_program(tmp_path_factory.mktemp("localize-export"))
