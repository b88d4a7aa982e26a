"""The binary x runtime QAIRT rule (harness/qnn/compat.py) and its tool: QNN's own
contextCreateFromBinary on the host's QAIRT 2.49.40 refuses the QAIRT 2.51.0 binary (err 5000)
and loads 2.49.40's, the tool's cells agree with the rule, and the shipped table (measured over
QAIRT 2.48.40 .. 2.51.0) is the rule the load preflight applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.qnn import CompatTable, find_host_qnn, loads_on, trial
from harness.qnn.probe.compat import main
from tests.qnn.material import NEWER_CTX, et_qnn_or_skip, wheel_or_skip


def test_the_rule_is_the_qairt_release_order() -> None:
    assert loads_on("v2.49.40.260810104044", "v2.51.0.260929181845") is True
    assert loads_on("v2.51.0.260929181845", "v2.49.40.260810104044") is False
    assert loads_on("v2.49.40.1", "v2.49.40.2") is True  # the same release
    assert loads_on(None, "v2.49.40") is None and loads_on("v2.49.40", "") is None


def test_the_shipped_table_is_the_rule_the_preflight_applies() -> None:
    table = CompatTable.read()
    assert {r.split(".")[1] for r in table.runtimes} == {"48", "49", "50", "51"}
    assert len(table.cells) >= 60 and all(c.agrees for c in table.cells)
    assert {c.loaded for c in table.cells} == {True, False}  # both sides measured
    assert all(loads_on(c.built_with, c.runtime) == c.loaded for c in table.cells)


@pytest.mark.real_qnn
def test_qnn_itself_refuses_a_newer_binary_and_loads_its_own(tmp_path: Path, capsys) -> None:
    wheel_or_skip()
    own = et_qnn_or_skip("ctx", "qwen3-16a4w-sm8650.bin")
    host = find_host_qnn()
    found = trial(host.htp_lib, [NEWER_CTX, own])
    assert {name: rc for name, (rc, _said) in found.items()} == {str(NEWER_CTX): 5000, str(own): 0}
    assert "Using newer context binary on old SDK" in found[str(NEWER_CTX)][1]  # QNN's own words
    out = tmp_path / "compat.json"
    assert main(["--runtime", str(host.htp_lib.parent), "--out", str(out), str(NEWER_CTX), str(own)]) == 0
    cells = {c["binary"]: c for c in json.loads(out.read_text())["cells"]}
    assert cells[NEWER_CTX.name]["built_with"].startswith("v2.51.0") and cells[NEWER_CTX.name]["soc_model"] == 57
    assert cells[NEWER_CTX.name]["producer"] == "ONNX Runtime QNN EP" and not cells[NEWER_CTX.name]["predicted"]
    assert cells[own.name]["rc"] == 0 and cells[own.name]["runtime"] == host.qairt_build
