"""suites/executorch_qnn on the virtual SM8650 phone runs the real program (issue 41.3): the phone's
qnn_llama_runner is ExecuTorch's own on the host's HTP emulator (docs/virtual-lab.md#executorch), so
the session's real 16a8w lowering (tests/localize_kit) gives, through the virtual phone over adb, the
text the emulated host device gives for the same program and prompt; no virtual_behaviour.json is
read (there is none)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CELL = "test_quant_format_runs[16a8w]"
pytestmark = [pytest.mark.real_qnn, pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(2400)]


def _cell(argv: list[str], records: Path) -> dict[str, Any]:
    """The format cell's record (its text, status and properties) from the pytest door's records file."""
    res = subprocess.run([sys.executable, "-m", "pytest", str(REPO / "suites" / "executorch_qnn"), "-q",
                          "-p", "no:cacheprovider", "-k", "test_quant_format_runs and 16a8w", *argv,
                          f"--harness-records={records}"], cwd=REPO, capture_output=True, text=True, timeout=1800)
    found = [r for line in records.read_text().splitlines() if (r := json.loads(line))["name"].endswith(CELL)]
    assert found, res.stdout[-3000:]
    return found[-1]


def test_the_virtual_phone_runs_the_real_program_as_the_emulated_host_does(
        vlab, tmp_path: Path, float_reference_exports: dict[str, Path]) -> None:
    model = float_reference_exports["healthy"]
    assert not list(model.rglob("virtual_behaviour.json"))
    phone = _cell(["--device", "sm8650-qrd", "--devices-file", str(vlab.devices_yaml), "--model-dir", str(model),
                   "--runtime-dir", str(vlab.runtime_dir("v75", kind="executorch")), "--qnn-sdk", str(vlab.qnn_sdk_dir)],
                  tmp_path / "phone.jsonl")
    devices = tmp_path / "emu.yaml"
    devices.write_text(yaml.safe_dump({"devices": [{"name": "sm8650-emu", "transport": "local", "soc": "SM8650",
                                                    "htp": "emulator", "work_dir": str(tmp_path / "emu")}]}))
    emulated = _cell(["--device", "sm8650-emu", "--devices-file", str(devices), "--model-dir", str(model)],
                     tmp_path / "emu.jsonl")
    # The phone's runtime has no pybindings runner, so its cell stops before the float judging (a skip
    # that says it ran); the emulated one judges. Both ran the program through qnn_llama_runner.
    assert phone["status"] in ("passed", "skipped") and emulated["status"] == "passed", (phone, emulated)
    assert phone["backend_pair"] == emulated["backend_pair"] == "qnn:16a8w"
    assert phone["text"] and phone["text"] == emulated["text"], (phone["text"], emulated["text"])
