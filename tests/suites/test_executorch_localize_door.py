"""Issue 33's must-show through pytest's door, for real: `pytest suites/executorch_qnn --localize
--model-dir ...` on an export a plan's stage built with its debug build (`debug: true`;
tests/lab/localize_night.py), the seed's MUL-range fault planted at layer 0 of a 2-layer decoder
(other tests plant layers 1 and 2): on the emulated SM8650 the localize testcase fails naming
layer 0's SwiGLU MUL as the first departure, in its message and its JUnit properties."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.lab.localize_night import DEVICE, DOOR_FAULT_LAYER, FAULT_DOOR, FORMAT, REPO, export_only, need_host_qnn, planted

# Two real lowerings (the program and its debug build) through the export stage, one debug run.
# Its own lowerings through the plan's stage (~70 s idle): in `make test-heavy` beside the plan door's
# (tests/lab/test_exports_localize_real.py); `make test` localizes in the cell with the run's shared
# lowerings (tests/suites/test_executorch_localize.py, tests/checks/test_localize_real.py).
pytestmark = [pytest.mark.real_qnn, pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    need_host_qnn()
    work = tmp_path_factory.mktemp("localize-door")
    stage, devices = export_only(work)
    assert [r.job.id for r in stage.results if r.ok] == [f"sm8650-{FORMAT}", f"sm8650-{FORMAT}-debug"], \
        [r.reason() for r in stage.results if not r.ok]
    model_dir = stage.root / FAULT_DOOR / "SM8650"
    junit = work / "junit.xml"
    argv = [sys.executable, "-m", "pytest", "suites/executorch_qnn", "-q", "-p", "no:cacheprovider",
            "--devices-file", str(devices), "--device", DEVICE, "--model-dir", str(model_dir), "--localize",
            "--checks", "localize", f"--junitxml={junit}"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    return done, junit, model_dir / "debug" / FORMAT


def test_pytest_localize_names_layer_0s_mul_as_the_first_departure(door) -> None:
    done, junit, debug_build = door
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]  # the localize testcase failed
    case = next((c for c in ET.parse(junit).getroot().iter("testcase")
                 if c.get("name", "").startswith(f"test_localize[{FORMAT}")), None)
    assert case is not None, done.stdout[-3000:]
    props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    assert props.get("localize") == "departed", (props, done.stdout[-3000:])
    assert props["localize_layer"] == f"layers.{DOOR_FAULT_LAYER}" and "mul" in props["localize_target"], props
    assert props["localize_first_op"] == planted(debug_build), props
    failure = case.find("failure")
    assert failure is not None and props["localize_first_op"] in (failure.get("message") or ""), ET.tostring(case)
