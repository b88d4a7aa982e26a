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


def test_status_of_a_lab_of_hung_links_is_bounded_by_the_pool_and_one_deadline(tmp_path):
    """300 devices whose links hang: at most `workers` probe threads, and one deadline for the
    whole lab (before: a thread per device and a join of timeout_s per device, 300 s here)."""
    import threading
    import time

    from labkit import write_inventory

    from harness.inventory import load_inventory

    inv = load_inventory(write_inventory(tmp_path, 300))
    hang, peak, before = threading.Event(), [0], threading.active_count()
    opened = faulty_factory(Switch())

    def hung_link(device):
        peak[0] = max(peak[0], threading.active_count())
        hang.wait(30)  # a link that never answers within the deadline
        return opened(device)

    t0 = time.monotonic()
    try:
        statuses = collect_status(inv, tmp_path / "locks", timeout_s=1.0, workers=8, transport_factory=hung_link)
    finally:
        hang.set()
    assert time.monotonic() - t0 < 15  # a hang guard (one 1 s deadline, not 300 of them)
    assert peak[0] <= before + 8
    notes = [s.health_note for s in statuses]
    assert notes.count("no answer within 1 s") == 8
    assert notes.count("not checked: the 1 s for the whole lab ran out first") == 292
