"""The localization must-show's plan (issue 33), shared by the plan door's test
(tests/lab/test_exports_localize_real.py) and pytest's (tests/suites/test_executorch_localize_door.py):
examples/et_qnn/lower_decoder.py's SwiGLU decoder exported by a plan's stage for SM8650 at 16a8w,
healthy and with the seed's fault at layers no other test plants (tests plant layer 1: the plan door
shows layer 2 of a 3-layer decoder, pytest's door layer 0 of a 2-layer one), each with its debug build.

Each test writes its own plan (`night_plan`: the plan door's two models, localized; `door_plan`:
pytest's model, `debug: true`), absolute exporter paths, so the keys are the same wherever the plan
sits, and runs its export stage with the session's HARNESS_CACHE_DIR (tests/conftest.py): six
lowerings a session, each built once; a test run again in the session gets them from the cache."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "et_qnn"
FORMAT = "16a8w"
DEVICE = "emu-sm8650"
PLAN_FAULT_LAYER = 2  # the plan door's fault (3 layers)
DOOR_FAULT_LAYER = 0  # pytest's door's fault (2 layers)
HEALTHY, FAULT_PLAN, FAULT_DOOR = "dec3-healthy", f"dec3-fault{PLAN_FAULT_LAYER}", f"dec2-fault{DOOR_FAULT_LAYER}"


def need_host_qnn() -> None:
    """Skips with the reason without the `qnn` extra, ExecuTorch's pybindings or a host QNN."""
    from tests.qnn.material import emulator_extras_or_skip

    emulator_extras_or_skip()
    if importlib.util.find_spec("executorch") is None:
        pytest.skip("the `qnn` extra is not installed (pip install 'harness[qnn]'): no ExecuTorch")
    from harness.errors import HarnessError
    from harness.qnn import find_host_qnn

    try:
        find_host_qnn()
    except HarnessError as exc:
        pytest.skip(f"no usable host QNN: {exc}")


def _build(model: str, layers: int, fault: int | None, **more: Any) -> dict[str, Any]:
    command = ["python", str(EXAMPLE / "lower_decoder.py"), "--soc", "{soc}", "--format", "{format}",
               "--layers", str(layers), "--dim", "64", "--mlp", "swiglu", "--out", "{out}"]
    if fault is not None:
        command[-2:-2] = ["--plant-mul-range-fault", str(fault)]
    return {"model": model, "kind": "executorch", "command": command, "debug_args": ["--debug-program"],
            "targets": ["SM8650"], "formats": [FORMAT],
            "inputs": [str(EXAMPLE / f) for f in ("lower_decoder.py", "debug_program.py", "plant_fault.py")],
            "qnn_host": True, "timeout_s": 1800, **more}


def _write(folder: Path, builds: list[dict[str, Any]], suite: dict[str, Any]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    plan = {"name": "localize-night", "devices": [DEVICE], "exports": {"parallel": 2, "builds": builds},
            "suites": [{"name": "executorch_qnn", "timeout_s": 1800, **suite}], "locks": {"wait_s": 60}}
    (folder / "nightly.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    devices = {"devices": [{"name": DEVICE, "transport": "local", "soc": "SM8650", "htp": "emulator",
                            "work_dir": str(folder / "device")}]}
    (folder / "devices.yaml").write_text(yaml.safe_dump(devices))
    return folder / "nightly.yaml", folder / "devices.yaml"


def night_plan(folder: Path) -> tuple[Path, Path]:
    """The plan door's plan and its inventory (one emulated SM8650): the two 3-layer decoders,
    localized (`localize: true` asks the stage for their debug builds), the localize check only."""
    return _write(folder, [_build(HEALTHY, 3, None), _build(FAULT_PLAN, 3, PLAN_FAULT_LAYER)],
                  {"models": [HEALTHY, FAULT_PLAN], "checks": ["localize"], "localize": True})


def door_plan(folder: Path) -> tuple[Path, Path]:
    """pytest's door's plan: the 2-layer decoder, its debug build asked by `debug: true`."""
    return _write(folder, [_build(FAULT_DOOR, 2, DOOR_FAULT_LAYER, debug=True)], {"models": [FAULT_DOOR]})


def export_only(folder: Path) -> tuple[Any, Path]:
    """pytest's door's plan's export stage alone (as `harness export` runs it): the stage and the inventory."""
    from harness.lab.exports import run_export_stage
    from harness.lab.plan import load_plan

    plan_path, devices = door_plan(folder)
    plan = load_plan(plan_path)
    assert plan.exports is not None
    stage = run_export_stage(plan.exports, [], folder / "out", stop=threading.Event(), say=lambda _m: None,
                             run_id="door")
    return stage, devices


def planted(debug_build: Path) -> str:
    """The reference-graph node the exporter says it planted the fault at (qnn_encodings.json)."""
    import json

    return str(json.loads((debug_build / "qnn_encodings.json").read_text())["planted_fault"])
