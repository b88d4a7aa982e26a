"""`htp: emulator`: a local device with an HTP SoC whose QNN cells run on the host's QAIRT
emulator. Checked on load: only on local devices, only the value `emulator`, and a local device
with an HTP SoC but no `htp:` is refused with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import InventoryError
from harness.inventory import parse_inventory

P = Path("/lab/devices.yaml")


def _local(**extra):
    return {"name": "emu", "transport": "local", "work_dir": "/tmp/emu", **extra}


@pytest.mark.parametrize("soc,arch", [("SM8650", "v75"), ("SA8295", "v68"), ("SM8750", "v79")])
def test_an_emulated_soc_is_a_device_with_its_table_facts(soc, arch):
    d = parse_inventory({"devices": [_local(soc=soc, htp="emulator")]}, P).get("emu")
    assert d.emulated and d.has_htp and d.htp_arch == arch and d.timing == "emulator"
    assert "HTP emulator " + arch in d.describe() and soc in d.describe()


def test_a_real_device_is_timed_as_a_device():
    d = parse_inventory({"devices": [{"name": "p", "transport": "adb", "serial": "X", "soc": "SM8650"}]}, P).get("p")
    assert not d.emulated and d.timing == "device" and "HTP emulator" not in d.describe()


def test_a_local_htp_soc_without_the_emulator_is_refused_with_the_fix():
    with pytest.raises(InventoryError) as err:
        parse_inventory({"devices": [_local(soc="SM8650")]}, P)
    msg = str(err.value)
    assert "device 'emu'" in msg and "no Hexagon HTP" in msg and "htp: emulator" in msg and "soc: host" in msg


@pytest.mark.parametrize("entry,words", [
    (_local(soc="SM8650", htp="hardware"), ["key 'htp'", "'hardware' is not an HTP mode", "htp: emulator"]),
    ({"name": "p", "transport": "adb", "serial": "X", "soc": "SM8650", "htp": "emulator"},
     ["key 'htp'", "adb device", "transport: local"]),
    ({"name": "c", "transport": "ssh", "ssh": {"host": "h"}, "soc": "SA8295", "work_dir": "/d", "htp": "emulator"},
     ["key 'htp'", "ssh device"]),
    (_local(htp="emulator"), ["key 'htp'", "soc: host has no HTP"]),
    (_local(soc="SM8650", htp=1), ["key 'htp'"]),
])
def test_bad_htp_keys_name_the_key_and_the_fix(entry, words):
    with pytest.raises(InventoryError) as err:
        parse_inventory({"devices": [entry]}, P)
    for w in words:
        assert w in str(err.value), (w, str(err.value))
