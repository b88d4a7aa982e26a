"""Runner test fixtures live in runner_helpers.py (importable by the tests by that unique name)."""

from runner_helpers import local_setup  # noqa: F401
