"""Top-level pytest configuration shared by the harness's own tests and the device suites.

The harness plugin itself is registered through the `pytest11` entry point (pyproject);
this file only adds repository-level conveniences."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shared import SHARED

REPO = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The planners' read-only material (../shared); tests that need it skip without it."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: this test reads the shared reference material")
    return SHARED
