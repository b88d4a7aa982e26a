"""devices.yaml keys for labgrid places and for adb servers reached through ssh: the good
forms load, every bad one is one clear InventoryError naming the file, device and key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.errors import InventoryError
from harness.inventory import load_inventory

TOP = "labgrid: {coordinator: '127.0.0.1:20408'}\n"
PHONE = "  - name: phone\n    transport: adb\n    serial: abc\n    soc: SM8750\n"
CAR = "  - name: car\n    transport: ssh\n    soc: SA8295\n    work_dir: /data/h\n"


def load(tmp_path: Path, text: str):
    path = tmp_path / "devices.yaml"
    path.write_text(textwrap.dedent(text))
    return load_inventory(path)


def test_places_reservations_and_tunnels_load(tmp_path):
    inv = load(tmp_path, TOP + "devices:\n" + PHONE + "    labgrid: {place: op13}\n"
               + CAR + "    labgrid: {tags: {board: sa8295, site: lab_2}, prio: 5}\n"
               + "    ssh: {key: id_ed25519, known_hosts: known}\n"
               + "  - name: far\n    transport: adb\n    serial: def\n    soc: SM8650\n"
               + "    adb_server:\n      port: 5038\n      via_ssh: {host: lab2, user: harness, key: k, known_hosts: kh}\n")
    phone, car, far = inv.get("phone"), inv.get("car"), inv.get("far")
    assert inv.labgrid_coordinator == "127.0.0.1:20408"
    assert (phone.labgrid.place, phone.labgrid.resource, phone.adb_server) == ("op13", "ADBServer", None)
    assert car.labgrid.place is None and car.labgrid.tags == (("board", "sa8295"), ("site", "lab_2"))
    assert car.labgrid.prio == 5.0 and car.labgrid.resource == "NetworkService"
    assert car.ssh.key == tmp_path / "id_ed25519" and car.ssh.host == ""
    assert "labgrid reservation board=sa8295 site=lab_2" in car.describe()
    assert far.labgrid is None and str(far.adb_server) == "127.0.0.1:5038 via ssh harness@lab2:22"
    assert far.adb_server.via_ssh.known_hosts == tmp_path / "kh"


def test_a_place_with_a_tunnel_keeps_only_via_ssh(tmp_path):
    inv = load(tmp_path, TOP + "devices:\n" + PHONE + "    labgrid: {place: op13}\n"
               + "    adb_server: {via_ssh: {host: lab1, user: u, known_hosts: kh}}\n")
    assert inv.get("phone").adb_server.via_ssh.host == "lab1"


BAD = [
    ("place without coordinator", "devices:\n" + PHONE + "    labgrid: {place: op13}\n",
     ["device 'phone'", "key 'labgrid'", "no coordinator"]),
    ("place and tags", TOP + "devices:\n" + PHONE + "    labgrid: {place: a, tags: {b: c}}\n",
     ["key 'labgrid'", "exactly one of `place` and `tags`"]),
    ("neither", TOP + "devices:\n" + PHONE + "    labgrid: {resource: X}\n", ["exactly one"]),
    ("bad tag", TOP + "devices:\n" + PHONE + "    labgrid: {tags: {Board: X}}\n",
     ["key 'labgrid.tags'", "does not accept as a tag"]),
    ("unknown labgrid key", TOP + "devices:\n" + PHONE + "    labgrid: {place: a, exporter: h}\n",
     ["key 'labgrid.exporter'", "not a known key"]),
    ("prio on a place", TOP + "devices:\n" + PHONE + "    labgrid: {place: a, prio: 2}\n",
     ["key 'labgrid.prio'", "reservations"]),
    ("local device", TOP + "devices:\n  - name: me\n    transport: local\n    soc: SM8750\n    htp: emulator\n    work_dir: w\n"
     "    labgrid: {place: a}\n", ["key 'labgrid'", "local device"]),
    ("address twice", TOP + "devices:\n" + PHONE + "    labgrid: {place: a}\n    adb_server: '10.0.0.1:5037'\n",
     ["key 'adb_server'", "place publishes"]),
    ("ssh host with a place", TOP + "devices:\n" + CAR + "    labgrid: {place: car}\n    ssh: {host: h}\n",
     ["key 'ssh.host'", "labgrid place"]),
    ("bad coordinator", "labgrid: {coordinator: 'host:port'}\ndevices:\n" + PHONE,
     ["key 'labgrid.coordinator'", "not HOST:PORT"]),
    ("coordinator missing", "labgrid: {}\ndevices:\n" + PHONE, ["key 'labgrid.coordinator'", "is missing"]),
    ("adb_server wrong type", "devices:\n" + PHONE + "    adb_server: [a]\n",
     ["key 'adb_server'", "HOST:PORT or a mapping"]),
    ("via_ssh without host", "devices:\n" + PHONE + "    adb_server: {via_ssh: {user: u}}\n",
     ["key 'adb_server.via_ssh.host'", "is missing"]),
    ("via_ssh unknown key", "devices:\n" + PHONE + "    adb_server: {via_ssh: {host: h, pasword: x}}\n",
     ["key 'adb_server.via_ssh.pasword'", "not a known key"]),
    ("adb_server port range", "devices:\n" + PHONE + "    adb_server: {port: 70000}\n",
     ["key 'adb_server.port'", "out of range"]),
]


@pytest.mark.parametrize("label,text,needles", BAD, ids=[b[0] for b in BAD])
def test_bad_labgrid_and_tunnel_keys(tmp_path, label, text, needles):
    with pytest.raises(InventoryError) as info:
        load(tmp_path, text)
    message = str(info.value)
    assert message.startswith(str(tmp_path / "devices.yaml")), message
    for needle in needles:
        assert needle in message, f"{label}: {needle!r} not in {message!r}"
