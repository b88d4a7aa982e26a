"""devices.yaml loading: the shipped example resolves, and every malformed file gives one
clear message naming the file, the device and the key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.errors import InventoryError
from harness.inventory import load_inventory

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "devices.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_shipped_inventory_resolves_soc_facts() -> None:
    inv = load_inventory(REPO / "devices.yaml")
    op13 = inv.get("oneplus13")
    assert (op13.soc_model, op13.soc_id, op13.htp_arch, op13.vtcm_mb) == ("SM8750", 69, "v79", 8)
    board = inv.get("sm8650-qrd")
    assert (board.soc_id, board.htp_arch) == (57, "v75")
    assert str(board.adb_server) == "10.20.0.12:5037"
    car = inv.get("sa8295-car")
    assert car.transport.name == "ssh" and (car.soc_id, car.htp_arch) == (39, "v68")
    assert car.ssh is not None and car.ssh.trust_new_host_key is False


def test_select_by_tag_and_name() -> None:
    inv = load_inventory(REPO / "devices.yaml")
    assert [d.name for d in inv.select(tags=["car"])] == ["sa8295-car"]
    assert [d.name for d in inv.select(names=["oneplus13"])] == ["oneplus13"]
    with pytest.raises(InventoryError, match="no device named 'nope'"):
        inv.select(names=["nope"])


GOOD = """
devices:
  - name: phone
    transport: adb
    serial: abc
    soc: SM8750
"""

MALFORMED = [
    ("unknown key",
     "devices:\n  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM8750\n    colour: red\n",
     ["device 'phone'", "key 'colour'", "not a known key"]),
    ("wrong type",
     "devices:\n  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM8750\n    tags: phone\n",
     ["device 'phone'", "key 'tags'", "must be a list"]),
    ("missing serial",
     "devices:\n  - name: phone\n    transport: adb\n    soc: SM8750\n",
     ["device 'phone'", "key 'serial'", "is missing"]),
    ("duplicate name",
     GOOD + "  - name: phone\n    transport: adb\n    serial: def\n    soc: SM8650\n",
     ["device 'phone'", "key 'name'", "duplicate"]),
    ("bad arch",
     "devices:\n  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM8750\n    htp_arch: v77\n",
     ["device 'phone'", "key 'htp_arch'", "'v77' is not an HTP arch"]),
    ("arch contradicts soc",
     "devices:\n  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM8750\n    htp_arch: v75\n",
     ["device 'phone'", "key 'htp_arch'", "v75 contradicts SM8750 (HTP v79)"]),
    ("soc_id contradicts soc",
     "devices:\n  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM8650\n    soc_id: 69\n",
     ["key 'soc_id'", "69 contradicts SM8650 (soc_id 57)"]),
    ("unknown soc without facts",
     "devices:\n  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM9999\n",
     ["key 'soc'", "not in the SoC table", "soc_id, htp_arch, vtcm_mb"]),
    ("bad transport",
     "devices:\n  - name: phone\n    transport: usb\n    serial: abc\n    soc: SM8750\n",
     ["key 'transport'", "'usb' is not a transport"]),
    ("ssh without ssh block",
     "devices:\n  - name: car\n    transport: ssh\n    soc: SA8295\n    work_dir: /data/h\n",
     ["device 'car'", "key 'ssh'", "is missing"]),
    ("ssh unknown subkey",
     "devices:\n  - name: car\n    transport: ssh\n    ssh: {host: h, passwd: x}\n    soc: SA8295\n    work_dir: /d\n",
     ["device 'car'", "key 'ssh.passwd'"]),
    ("relative work dir",
     "devices:\n  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM8750\n    work_dir: tmp/h\n",
     ["key 'work_dir'", "not an absolute path"]),
    ("bad adb server",
     "devices:\n  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM8750\n    adb_server: 'host:port'\n",
     ["key 'adb_server'", "not HOST:PORT"]),
    ("boolean where integer",
     "devices:\n  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM8750\n    vtcm_mb: true\n",
     ["key 'vtcm_mb'", "must be an integer"]),
    ("empty devices", "devices: []\n", ["key 'devices'", "non-empty list"]),
    ("top level list", "- name: phone\n", ["top level must be a mapping"]),
    ("device not a mapping", "devices:\n  - phone\n", ["device '#1'", "not a mapping"]),
    ("missing name", "devices:\n  - transport: adb\n    serial: x\n    soc: SM8750\n", ["device '#1'", "no `name`"]),
]


@pytest.mark.parametrize("label,text,needles", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_inventory_gives_one_clear_message(tmp_path: Path, label: str, text: str, needles: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    for needle in needles:
        assert needle in message, f"{label}: {needle!r} not in {message!r}"
    assert "; " in message, "the message must say what to do"


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "devices:\n  - name: phone\n    transport: [adb\n    serial: x\n")
    with pytest.raises(InventoryError, match=r"YAML syntax error at line \d+, column \d+"):
        load_inventory(path)


def test_unreadable_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="file not found"):
        load_inventory(tmp_path / "absent.yaml")
    binary = tmp_path / "devices.yaml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InventoryError, match="cannot read the file"):
        load_inventory(binary)


def test_soc_outside_table_with_explicit_facts(tmp_path: Path) -> None:
    path = write(tmp_path, "devices:\n  - name: x\n    transport: adb\n    serial: s\n    soc: QRB5165\n"
                           "    soc_id: 41\n    htp_arch: 68\n    vtcm_mb: 4\n")
    d = load_inventory(path).get("x")
    assert (d.soc_model, d.soc_id, d.htp_arch, d.vtcm_mb) == ("QRB5165", 41, "v68", 4)
