"""`pytest suites/executorch_qnn --device host`: ExecuTorch's real LLM runner on ../shared's tiny
XNNPACK llama (the `executorch` extra): the CPU export runs and its numbers add up, QNN formats
skip with the reason, the real load failure is classified, a real ETDump lands in the report."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SHARED_EXPORT = REPO.parent / "shared" / "models" / "et-tiny-llama-xnnpack"


@pytest.mark.slow
def test_host_lane_on_the_real_runner(tmp_path: Path) -> None:
    pytest.importorskip("executorch.extension.llm.runner", reason="the host lane needs the optional `executorch` "
                        "extra (pip install 'harness[executorch]')")
    if not (SHARED_EXPORT / "model.pte").is_file():
        pytest.skip(f"{SHARED_EXPORT} is absent: the host lane runs ../shared's tiny ExecuTorch llama")
    # the repository's devices.yaml names the host; a copy keeps the claim folder in tmp_path
    devices = tmp_path / "devices.yaml"
    spec = next(d for d in yaml.safe_load((REPO / "devices.yaml").read_text())["devices"] if d["name"] == "host")
    devices.write_text(yaml.safe_dump({"devices": [{**spec, "work_dir": str(tmp_path / "work")}]}))
    junit, records = tmp_path / "et.xml", tmp_path / "records.jsonl"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "executorch_qnn"), "-q", "-rs", "-p", "no:cacheprovider",
         "--device", "host", "--devices-file", str(devices), f"--junitxml={junit}", f"--harness-records={records}"],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:]
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    for name in ("test_cpu_export_runs", "test_load_failure_is_classified", "test_etdump_profile"):
        assert cases[name].find("skipped") is None and cases[name].find("failure") is None, name
    skip = cases["test_quant_format_runs[16a4w]"].find("skipped")
    assert skip is not None and "has no HTP" in (skip.get("message") or "")
    props = {p.get("name"): p.get("value") for p in cases["test_etdump_profile"].iter("property")}
    assert props["etdump_backends"] == "XnnpackBackend" and props["etdump_calls"] == "5"
    assert props["etdump_top_not_delegated"]  # the largest by measured time (varies run to run)
    recs = {json.loads(x)["name"].split("::", 1)[1]: json.loads(x) for x in records.read_text().splitlines()}
    cpu = recs["test_cpu_export_runs"]
    assert cpu["backend_pair"] == "cpu:cpu" and cpu["prefill_tps"] > 0
    etdump = recs["test_etdump_profile"]["extras"]["etdump"]
    assert etdump["backends"]["XnnpackBackend"]["ops"] > 0 and "llama::custom_sdpa.out" in etdump["not_delegated"]
