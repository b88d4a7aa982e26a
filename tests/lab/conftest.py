"""Fixtures for lab tests; the helpers live in labkit.py."""

from __future__ import annotations

import pytest
from labkit import write_inventory, write_plan

from harness.inventory import load_inventory
from harness.lab.plan import load_plan


@pytest.fixture
def lab4(tmp_path):
    inv = load_inventory(write_inventory(tmp_path, 4))
    return inv, tmp_path


@pytest.fixture
def make_plan(tmp_path):
    def make(**overrides):
        return load_plan(write_plan(tmp_path, **overrides))

    return make
