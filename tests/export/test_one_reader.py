"""Provisioning and the shape checks read an export through the same reader (harness.export),
so they agree on which configs run QNN and which pair each config is."""

from __future__ import annotations

import json
from pathlib import Path

from harness.checks.shapes import check_export_shapes
from harness.export import open_export
from harness.provision import load_export
from virtual_lab.exports import make_qwen3_export


def test_shapes_and_provisioning_agree_on_a_qnn_config(tmp_path: Path) -> None:
    info = make_qwen3_export(tmp_path / "qwen3", size_mb=0.5)
    cfg_path = info.path / "config_qnn.json"
    cfg = json.loads(cfg_path.read_text())
    # The same stub, named the way a hand-edited config may name it, and without chunk_limits.
    cfg["llm_model"] = "./qnn/llm.mnn"
    del cfg["chunk_limits"]
    cfg_path.write_text(json.dumps(cfg))
    assert open_export(info.path).config("config_qnn.json").pair.uses_qnn_llm
    assert load_export(info.path).configs == open_export(info.path).pairs == {
        "qnn": "config_qnn.json", "cpu": "config.json"}
    # Before the shared reader, shapes took "./qnn/llm.mnn" for a CPU model and checked nothing.
    found = [f for f in check_export_shapes(info.path, "config_qnn.json") if f.kind == "chunk_limits"]
    assert [(f.where.file, f.where.key, f.found) for f in found] == [("config_qnn.json", "chunk_limits", "absent")]
