"""The static guard on a VL export's CPU graphs: visual.mnn's outputs (image embeds, each DeepStack
feature) against llm.mnn's inputs, on the REAL tiny Qwen3-VL export made by llmexport.py alone
(no qnn/ folder) and on copies with one graph changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.checks.shapes import check_export_shapes, graph_inputs, visual_outputs
from harness.mnn_graph import load_graph_json

REPO = Path(__file__).resolve().parents[2]
TINY = REPO.parent / "shared" / "models" / "qwen3-vl-tiny-random"


@pytest.fixture(scope="module")
def tiny() -> Path:
    if not (TINY / "visual.mnn").is_file():
        pytest.skip(f"{TINY} is absent: these tests read the real tiny Qwen3-VL export from ../shared")
    pytest.importorskip("_tools", reason="reading visual.mnn needs the mnn package's converter")
    return TINY


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file():
            (dst / f.name).symlink_to(f)
    return dst


def test_real_export_visual_outputs_fit_the_llm_inputs(tiny: Path) -> None:
    v = visual_outputs(load_graph_json(tiny / "visual.mnn"))
    assert (v.embeds_width, v.deepstack_count, v.deepstack_width) == (128, 3, 128)
    inputs = graph_inputs(load_graph_json(tiny / "llm.mnn.json"))
    assert inputs["deepstack_embeds"] == [3, 1, 128] and inputs["input_ids"] == [1, 1, 128]
    assert not (tiny / "qnn").exists()  # llmexport.py alone
    assert check_export_shapes(tiny) == []


def test_deepstack_input_with_other_rows_is_an_error(tiny: Path, tmp_path: Path) -> None:
    export = _copy(tiny, tmp_path / "export")
    graph = json.loads((tiny / "llm.mnn.json").read_text())
    for op in graph["oplists"]:
        if op.get("type") == "Input" and graph["tensorName"][op["outputIndexes"][0]] == "deepstack_embeds":
            op["main"]["dims"] = [2, 1, 128]
    (export / "llm.mnn.json").unlink()
    (export / "llm.mnn.json").write_text(json.dumps(graph))
    [f] = check_export_shapes(export)
    assert (f.kind, f.where.file, f.where.key, f.severity) == ("cpu_graph_io", "llm.mnn", "deepstack_embeds dim 0", "error")
    assert "3 (visual DeepStack features)" in str(f.expected) and f.found == "[2,1,128]"


def test_hidden_size_other_than_the_visual_merger_is_an_error(tiny: Path, tmp_path: Path) -> None:
    export = _copy(tiny, tmp_path / "export")
    cfg = json.loads((tiny / "llm_config.json").read_text())
    cfg["hidden_size"] = 256
    (export / "llm_config.json").unlink()
    (export / "llm_config.json").write_text(json.dumps(cfg))
    kinds = {(f.kind, f.where.key) for f in check_export_shapes(export)}
    assert ("cpu_graph_io", "image_embeds width") in kinds


def test_a_qnn_export_checks_its_cpu_graphs_too(tiny: Path, tmp_path: Path) -> None:
    """A qnn/ folder does not stop the CPU pair's graphs from being read."""
    export = _copy(tiny, tmp_path / "export")
    (export / "qnn").mkdir()
    graph = json.loads((tiny / "llm.mnn.json").read_text())
    graph["oplists"] = [op for op in graph["oplists"] if not (
        op.get("type") == "Input" and graph["tensorName"][op["outputIndexes"][0]] == "deepstack_embeds")]
    (export / "llm.mnn.json").unlink()
    (export / "llm.mnn.json").write_text(json.dumps(graph))
    shutil.copy2(tiny / "config.json", export / "config_cpu.json")
    found = [f for f in check_export_shapes(export, "config_cpu.json") if f.kind == "cpu_graph_io"]
    assert [(f.where.key, f.found) for f in found] == [("deepstack_embeds", "absent")]
