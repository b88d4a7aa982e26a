"""A `local` device that is the host needs no Qualcomm SoC: `soc: host` or no `soc:` at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import InventoryError
from harness.inventory import parse_inventory

P = Path("/lab/devices.yaml")


@pytest.mark.parametrize("extra", [{}, {"soc": "host"}, {"soc": "HOST"}])
def test_local_host_without_a_soc(extra):
    inv = parse_inventory({"devices": [{"name": "pc", "transport": "local", "work_dir": "/tmp/h", **extra}]}, P)
    d = inv.get("pc")
    assert d.soc_model == "host" and not d.has_htp and d.htp_arch == "" and d.arch_number == 0
    assert "no HTP" in d.describe()


def test_host_is_only_for_local_devices():
    with pytest.raises(InventoryError, match="only for `transport: local`"):
        parse_inventory({"devices": [{"name": "p", "transport": "adb", "serial": "X", "soc": "host"}]}, P)
    with pytest.raises(InventoryError, match="key 'soc': is missing"):
        parse_inventory({"devices": [{"name": "p", "transport": "adb", "serial": "X"}]}, P)


def test_host_refuses_htp_facts():
    with pytest.raises(InventoryError, match="htp_arch"):
        parse_inventory({"devices": [{"name": "pc", "transport": "local", "work_dir": "w", "htp_arch": "v79"}]}, P)


def test_a_local_device_names_its_soc_with_the_emulator():
    inv = parse_inventory({"devices": [{"name": "b", "transport": "local", "work_dir": "w", "soc": "SM8750",
                                        "htp": "emulator"}]}, P)
    assert inv.get("b").has_htp and inv.get("b").htp_arch == "v79" and inv.get("b").emulated
