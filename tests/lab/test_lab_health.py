
from labkit import FaultyLocal, Switch

from harness.lab import HealthPolicy, check_device, judge
from harness.transport import NO_RETRY, DeviceFacts, LocalTransport

MB = 1 << 20


def test_judge_applies_each_threshold_only_when_reported():
    p = HealthPolicy(min_free_mb=100, min_battery_pct=20, max_battery_temp_c=40)
    assert judge("d", DeviceFacts(), p) == []
    assert judge("d", DeviceFacts(free_bytes=500 * MB, battery_pct=80, battery_temp_c=30.5, boot_completed=True), p) == []
    reasons = judge("d", DeviceFacts(free_bytes=50 * MB, battery_pct=5, battery_temp_c=47.0, boot_completed=False), p)
    assert len(reasons) == 4
    assert any("50 MB free" in r for r in reasons) and any("battery at 5%" in r for r in reasons)
    assert any("47.0 C" in r for r in reasons) and any("boot not completed" in r for r in reasons)
    assert judge("d", DeviceFacts(boot_completed=False), HealthPolicy(require_boot_completed=False)) == []


def test_local_device_is_checked_for_real(lab4):
    inv, root = lab4
    t = LocalTransport(inv.get("dev0"))
    verdict = check_device(t, HealthPolicy(min_free_mb=1))
    assert verdict.ok, verdict.reasons
    assert int(verdict.facts["free_mb"]) > 1
    # Before the first push the work folder does not exist: df looks at its nearest ancestor.
    assert verdict.facts["free_path"] == str(root)
    (root / "dev0").mkdir()
    assert check_device(t, HealthPolicy(min_free_mb=1)).facts["free_path"] == str(root / "dev0")
    greedy = check_device(t, HealthPolicy(min_free_mb=1 << 40))
    assert not greedy.ok and "MB free" in greedy.summary()


def test_unreachable_and_reported_facts(lab4):
    inv, _ = lab4
    switch = Switch()
    t = FaultyLocal(inv.get("dev1"), retry=NO_RETRY)
    t.switch = switch
    switch.facts["dev1"] = {"battery_pct": "3", "battery_temp_c": "31.0"}
    verdict = check_device(t, HealthPolicy(min_free_mb=1))
    assert not verdict.ok and "battery at 3%" in verdict.summary()
    switch.unplug("dev1")
    verdict = check_device(t, HealthPolicy(min_free_mb=1))
    assert not verdict.ok and verdict.state == "unreachable" and "offline" in verdict.summary()


def test_virtual_adb_device_health(vlab_factory):
    from harness.transport import open_transport
    from virtual_lab.lab import LabDeviceConfig

    lab = vlab_factory(devices=[LabDeviceConfig("phone", soc="SM8750", htp_arch="v79")])
    policy = HealthPolicy(min_free_mb=1, min_battery_pct=20, max_battery_temp_c=40)
    with open_transport(lab.inventory.get("phone"), retry=NO_RETRY) as t:
        ok = check_device(t, policy)
        assert ok.ok, ok.reasons
        assert ok.facts["boot_completed"] == "1" and ok.facts["battery_pct"] == "85"
        assert ok.facts["battery_temp_c"] == "31.2" and int(ok.facts["free_mb"]) > 1
        lab.adb_device("phone").set_battery(level=5, temperature_decic=455)
        low = check_device(t, policy)
        assert not low.ok and "battery at 5%" in low.summary() and "45.5 C" in low.summary()
    lab.adb_device("phone").faults.unauthorized()
    lab.adb_server_for("phone").disconnect(lab.adb_device("phone").serial)
    with open_transport(lab.inventory.get("phone"), retry=NO_RETRY) as t:
        denied = check_device(t, policy)
    assert not denied.ok and denied.state == "unauthorized" and "not authorized this computer" in denied.summary()
