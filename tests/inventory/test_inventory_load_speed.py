"""Reading devices.yaml makes as many objects as the file has values, all freed by their
counts: the cyclic collector is paused while they are made (harness/validation.py
`no_gc_pauses`: its collections were half of reading a 10 000-device file, docs/lab-scale.md),
and left as the caller had it, whatever the file."""

from __future__ import annotations

import gc

import pytest
import yaml

from harness.errors import InventoryError
from harness.inventory import load_inventory


def _inventory(tmp_path, n: int):
    devices = [{"name": f"dev{i}", "transport": "local", "soc": "SM8750", "htp": "emulator",
                "work_dir": str(tmp_path / f"dev{i}"), "tags": ["bench"]} for i in range(n)]
    path = tmp_path / "devices.yaml"
    path.write_text(yaml.safe_dump({"devices": devices}))
    return path


def test_reading_a_large_inventory_sets_off_no_full_collection(tmp_path):
    """Without the pause, 2 000 devices set off dozens of collections, some of every object;
    with it, at most the young objects' one that was due when the collector resumes."""
    path = _inventory(tmp_path, 2000)
    seen: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    assert gc.isenabled()
    gc.collect()
    gc.callbacks.append(count)
    try:
        inv = load_inventory(path)
    finally:
        gc.callbacks.remove(count)
    assert len(inv.devices) == 2000 and inv.devices["dev1999"].work_dir == str(tmp_path / "dev1999")
    assert len(seen) <= 2 and 2 not in seen, seen
    assert gc.isenabled()


def test_the_collector_is_left_as_the_caller_had_it(tmp_path):
    path = _inventory(tmp_path, 3)
    bad = tmp_path / "bad.yaml"
    bad.write_text("devices: [\n")
    try:
        gc.disable()
        load_inventory(path)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(InventoryError, match="YAML syntax error"):
        load_inventory(bad)
    assert gc.isenabled()
