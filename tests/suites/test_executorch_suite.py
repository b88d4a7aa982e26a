"""suites/executorch_qnn against the virtual OnePlus 13: the quant formats with an export run
through the virtual qnn_llama_runner; formats without one are skipped with the reason. The
virtual lab's programs are real where the host's QNN lowered them (docs/virtual-lab.md): where
the work ran is read from the program itself (docs/placement.md) and recorded with its sha256;
elsewhere they are stand-ins (a program header, no execution plan), and a stand-in that ran is
never a pass."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from virtual_lab.exports import make_executorch_export
from virtual_lab.qnn_cache import find_builder

REPO = Path(__file__).resolve().parents[2]


def test_executorch_suite_runs_each_exported_format(vlab, tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    for quant in ("16a4w", "16a8w", "16a4w_block"):
        make_executorch_export(exports / quant, soc_id=69)
    junit = tmp_path / "et.xml"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "executorch_qnn"), "-q", "-p", "no:cacheprovider",
         "--device", "oneplus13", "--devices-file", str(vlab.devices_yaml), "--model-dir", str(exports),
         "--runtime-dir", str(vlab.runtime_dir("v79", kind="executorch")), "--qnn-sdk", str(vlab.qnn_sdk_dir),
         # The virtual qnn_executor_runner writes a placeholder, not an ETDump: the real ETDump is
         # the host lane's (tests/suites/test_executorch_host_lane.py).
         "--deselect", "suites/executorch_qnn/test_executorch_qnn.py::test_etdump_profile",
         # no float reference beside them: nothing is judged, which this run allows (test_judged says so)
         "--allow-unjudged", f"--junitxml={junit}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    real = find_builder()[0] is not None  # the host's QNN lowered real programs; else stand-ins
    assert res.returncode == (0 if real else 1), res.stdout[-2000:]
    for quant in ("16a4w", "16a8w", "16a4w_block"):
        case = cases[f"test_quant_format_runs[{quant}]"]
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        # It ran through the virtual runner (the simulated NPU decides the tokens) ...
        assert props["backend_pair"] == f"qnn:{quant}" and float(props["decode_tps"] or 0) > 0
        if not real:  # ... and a stand-in's placement cannot be read: never a pass
            failure = case.find("failure")
            assert failure is not None and "not a readable ExecuTorch program" in (failure.get("message") or ""), quant
            continue
        # ... its placement read from the real program, its provenance the file's own sha256; no
        # float reference beside it, so it is not judged: a skip that says it ran
        program = exports / quant / "kv_llama_qnn.pte"
        assert props["placement"] == "QnnBackend x1; nothing on the CPU"
        assert props["program_sha256"] == hashlib.sha256(program.read_bytes()).hexdigest()
        assert props["tier"] == "npu" and len(props["binaries_sha256"] or "") == 64
        skipped = case.find("skipped")
        assert skipped is not None and f"{quant} ran, but" in (skipped.get("message") or ""), quant
        assert "no float reference" in (skipped.get("message") or "")
    assert cases["test_quant_format_runs[8a8w]"].find("skipped") is not None
    if real:
        judged = cases["test_judged"].find("skipped")
        assert judged is not None and "test_quant_format_runs[16a4w]: 16a4w ran, but" in (judged.get("message") or "")
        assert "allowed: --allow-unjudged" in (judged.get("message") or "")
    assert cases["test_load_failure_is_classified"].find("skipped") is not None  # host runner only
