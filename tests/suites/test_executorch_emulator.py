"""`pytest suites/executorch_qnn --device <an emulated SM8650>` on the host's real QAIRT HTP
emulator, and the night over the same device (a plan's `- name: executorch_qnn`): the QNN
formats of ../shared/models/et-qnn-host run and pass, and both doors write the same testcases
with the same verdicts (their JUnit compared case by case)."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.qnn.material import ET_QNN, emulator_extras_or_skip

REPO = Path(__file__).resolve().parents[2]
QNN_HOST = ET_QNN.resolve()  # as the plan resolves its paths
RAN = {"16a4w", "16a8w", "8a8w"}  # the SM8650 programs of et-qnn-host


def _need_the_real_thing() -> None:
    emulator_extras_or_skip()
    if not (QNN_HOST / "llm" / "kv-16a8w-sm8650.pte").is_file():
        pytest.skip(f"{QNN_HOST} is absent: the emulator lane runs ../shared's QNN programs")


def _verdicts(junit: Path) -> dict[str, tuple[str, str, dict[str, str]]]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        status, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                status, message = tag, el.get("message") or ""
                break
        out[case.get("name") or ""] = (status, message, {p.get("name") or "": p.get("value") or ""
                                                         for p in case.iter("property")})
    return out


@pytest.mark.slow
@pytest.mark.timeout(2400)  # two doors, each a few real runs on a shared 2-core host
def test_both_doors_run_the_qnn_formats_on_the_emulator_alike(tmp_path: Path) -> None:
    _need_the_real_thing()
    # Each door gets its own devices.yaml (the same emulated device, its own work dir and claim
    # folder beside the file), so the two run at once: each real run holds about one core.
    def lab(door: str) -> Path:
        (tmp_path / door).mkdir()
        devices = tmp_path / door / "devices.yaml"
        devices.write_text(yaml.safe_dump({"devices": [{"name": "sm8650-emu", "transport": "local", "soc": "SM8650",
                                                        "htp": "emulator", "work_dir": str(tmp_path / door / "work")}]}))
        return devices

    pytest_devices, night_devices = lab("pytest"), lab("night")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "emu", "devices": ["sm8650-emu"],
                                    "models": {"qnn-host": {"path": str(QNN_HOST), "kind": "executorch"}},
                                    "suites": [{"name": "executorch_qnn", "models": ["qnn-host"]}],
                                    "health": {"min_battery_pct": 0}}))
    door = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "executorch_qnn"), "-q", "-rs", "-p", "no:cacheprovider",
         "--device", "sm8650-emu", "--devices-file", str(pytest_devices), "--model-dir", str(QNN_HOST),
         f"--junitxml={tmp_path / 'pytest.xml'}"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    night = subprocess.Popen([sys.executable, "-m", "harness.cli", "--file", str(night_devices), "lab", "run", "--plan",
                              str(plan), "--out", str(tmp_path / "night")], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        door_out, _ = door.communicate(timeout=1200)
        night_out, _ = night.communicate(timeout=1200)
    finally:
        for proc in (door, night):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert door.returncode == 0, door_out[-3000:]
    assert night.returncode == 0, night_out[-4000:]
    pytest_cases, night_cases = _verdicts(tmp_path / "pytest.xml"), _verdicts(tmp_path / "night" / "junit.xml")
    assert sorted(pytest_cases) == sorted(night_cases)
    for name, (status, message, props) in pytest_cases.items():
        assert (status, message) == night_cases[name][:2], name
        for key in ("backend_pair", "timing", "etdump_unit", "etdump_delegated", "tier", "placement", "qairt",
                    "program_sha256"):
            assert props.get(key) == night_cases[name][2].get(key), (name, key)
    for quant in RAN:
        status, _, props = pytest_cases[f"test_quant_format_runs[{quant}]"]
        assert status == "passed" and props["timing"] == "emulator" and props["backend_pair"] == f"qnn:{quant}"
        # where it ran, read from the program: the KV program's one mask Cast is expected on the CPU
        assert props["tier"] == "emulator" and props["qairt"].startswith("v2.49") and len(props["program_sha256"]) == 64
        assert props["placement"].startswith("QnnBackend x"), props["placement"]
        assert not props.get("placement_unexpected_cpu_ops")
    skip = pytest_cases["test_quant_format_runs[16a4w_block]"]
    assert skip[0] == "skipped" and "no 16a4w_block program" in skip[1]
    assert float(pytest_cases["test_quant_format_runs[16a8w]"][2]["decode_tps"]) > 0
    profile = pytest_cases["test_etdump_profile"]
    assert profile[0] == "passed" and profile[2]["etdump_unit"] == "cycles" and int(profile[2]["etdump_delegated"]) > 0
