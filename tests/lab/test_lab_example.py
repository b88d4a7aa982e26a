"""examples/nightly.yaml runs as shipped against the default virtual lab, through the console
script as a user runs it, with the environment the file's header names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "nightly.yaml"

pytestmark = pytest.mark.slow


def test_example_plan_runs_as_shipped_on_the_virtual_lab(vlab_factory, tmp_path):
    from virtual_lab.exports import make_qwen3_export

    lab = vlab_factory()
    for d in lab.inventory.devices.values():  # one export and one runtime per HTP arch
        make_qwen3_export(tmp_path / "exports" / d.htp_arch, soc_id=d.soc_id, dsp_arch=d.htp_arch,
                          vtcm_mb=d.vtcm_mb, size_mb=1)
        lab.runtime_dir(d.htp_arch)
    env = {**os.environ, "PYTHONPATH": str(REPO), "LAB_EXPORTS": str(tmp_path / "exports"),
           "LAB_RUNTIMES": str(lab.root / "runtimes"), "QNN_SDK_ROOT": str(lab.qnn_sdk_dir)}
    out = tmp_path / "night"
    run = subprocess.run([sys.executable, "-m", "harness.cli", "--file", str(lab.devices_yaml), "lab", "run",
                          "--plan", str(EXAMPLE), "--out", str(out)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1]
    counts = json.loads((out / "night.json").read_text())["counts"]
    assert counts["passed"] > 0 and counts["failed"] == counts["error"] == 0
    assert last == (f"{counts['passed']} passed, 0 failed, 0 error, {counts['skipped']} skipped, "
                    "0 quarantined, 0 flaky")
    # Claims were taken beside devices.yaml (the plan names no folder) and all released.
    assert sorted(p.name for p in (lab.devices_yaml.parent / "locks").glob("*.lock")) == sorted(
        f"{n}.lock" for n in lab.inventory.devices)
    assert not list((lab.devices_yaml.parent / "locks").glob("*.holder.json"))
