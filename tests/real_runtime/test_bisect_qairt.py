"""`harness bisect --axis qairt` over real QAIRT releases (the x86 libraries of the onnxruntime-qnn
2.4.0 / 2.5.0 / 2.6.0 wheels = QAIRT 2.48.40 / 2.49.40 / 2.50.40, laid out as SDK roots) for the
ExecuTorch suite's 16a8w cell on an emulated SM8650: ExecuTorch 1.5.1 works with 2.49.40 only
(docs/host-qnn.md), so from the good 2.49.40 to 2.50.40 the cell fails, and 2.50.40 is named with
its evidence. The releases are not in the project's environment: unpack them as docs/qnn-compat.md
says into $HARNESS_QAIRT_SDKS (default /tmp/qairt-wheels) as qairt-2.48.40/, qairt-2.49.40/,
qairt-2.50.40/ (each lib/x86_64-linux-clang/ holding the wheel's libraries); absent, this skips."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cli import main
from tests.shared import SHARED

pytestmark = [pytest.mark.slow, pytest.mark.real_qnn]
RELEASES = ("qairt-2.48.40", "qairt-2.49.40", "qairt-2.50.40")


def test_bisect_names_the_qairt_release_executorch_cannot_drive(tmp_path, capsys, monkeypatch):
    root = Path(os.environ.get("HARNESS_QAIRT_SDKS", "/tmp/qairt-wheels"))
    sdks = [root / r for r in RELEASES]
    missing = [str(s) for s in sdks if not (s / "lib" / "x86_64-linux-clang" / "libQnnHtp.so").exists()]
    if missing:
        pytest.skip(f"QAIRT releases absent ({', '.join(missing)}): unpack onnxruntime-qnn 2.4.0-2.6.0 as the "
                    "module says")
    material = SHARED / "models" / "et-qnn-host"
    if not material.is_dir():
        pytest.skip(f"{material} is absent: the ExecuTorch programs come from ../shared")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    devices = tmp_path / "devices.yaml"
    devices.write_text(json.dumps({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "work")}]}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({
        "name": "qairt", "devices": ["emu"], "models": {"et": {"path": str(material), "kind": "executorch"}},
        "suites": [{"name": "executorch_qnn", "runner": "executorch", "models": ["et"],
                    "checks": ["quant_format_runs"], "timeout_s": 600}],
        "options": {"qnn_sdk": str(sdks[1])}}))
    code = main(["--file", str(devices), "bisect", "--plan", str(plan), "--device", "emu", "--axis", "qairt",
                 "--testcase", "test_quant_format_runs[16a8w]", "--versions", *map(str, sdks),
                 "--good", "qairt-2.49.40", "--bad", "qairt-2.50.40", "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    if "ExecuTorch" in out.err and "not installed" in out.err:
        pytest.skip("ExecuTorch is not installed (the executorch extra)")
    assert code == 0, out.err[-3000:]
    result = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert result["first_new_version"] == "qairt-2.50.40" and not result["fixes"], result
    bad = next(s for s in result["steps"] if s["version"] == "qairt-2.50.40")
    assert bad["status"] == "failed" and "cannot drive QAIRT 2.50.40" in bad["message"], bad
