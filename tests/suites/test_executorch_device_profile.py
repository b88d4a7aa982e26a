"""The ETDump check on the virtual OnePlus 13: the device lane adds `--profile_level 2` to
`qnn_executor_runner` and pulls the ETDump; the virtual phone's runner runs the program for real on
the host's HTP emulator (docs/virtual-lab.md), so QNN's per-op cycles come back as on a phone (the
check passes only with QNN's per-op events whose cycles add up to the accelerator's). ~60 s of
the suite's run on a loaded 2-core host."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from virtual_lab.exports import make_executorch_export
from virtual_lab.qnn_cache import find_builder

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_the_phone_lane_profiles_the_plain_program_per_op(vlab, tmp_path: Path) -> None:
    if find_builder()[0] is None:
        pytest.skip("the virtual lab's programs are stand-ins without the host's QNN: nothing to profile")
    exports = tmp_path / "exports"
    make_executorch_export(exports / "16a4w", soc_id=69)
    junit = tmp_path / "et.xml"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "executorch_qnn"), "-q", "-p", "no:cacheprovider",
         "--device", "oneplus13", "--devices-file", str(vlab.devices_yaml), "--model-dir", str(exports),
         "--runtime-dir", str(vlab.runtime_dir("v79", kind="executorch")), "--qnn-sdk", str(vlab.qnn_sdk_dir),
         "-k", "test_etdump_profile", f"--junitxml={junit}"],
        cwd=REPO, capture_output=True, text=True, timeout=800)
    case = next(c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "test_etdump_profile")
    assert case.find("failure") is None and case.find("skipped") is None, res.stdout[-3000:]
