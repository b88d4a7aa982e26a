from labkit import Switch, faulty_factory

from harness.lab import DeviceLock, collect_status, lab_status


def test_status_shows_devices_health_and_lock_holders(lab4):
    inv, root = lab4
    switch = Switch()
    switch.unplug("dev3")
    switch.facts["dev1"] = {"battery_pct": "2"}
    held = DeviceLock(root / "locks", "dev0", "night-42")
    held.acquire(0)
    try:
        text = lab_status(inv, root / "locks", transport_factory=faulty_factory(switch))
        statuses = {s.device.name: s for s in collect_status(inv, root / "locks", health=False)}
    finally:
        held.release()
    lines = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert text.splitlines()[0].split() == ["DEVICE", "TRANSPORT", "SOC", "HEALTH", "LOCK"]
    assert "run night-42" in lines["dev0"] and "held by host" in lines["dev0"] and "ok: healthy" in lines["dev0"]
    assert "FAIL:" in lines["dev1"] and "battery at 2%" in lines["dev1"] and lines["dev1"].endswith("free")
    assert "FAIL:" in lines["dev3"] and "offline" in lines["dev3"]
    assert "SM8650 v75" in lines["dev1"]
    assert "run night-42" in statuses["dev0"].claim and statuses["dev0"].health is None
    assert statuses["dev0"].health_text() == "not checked"
