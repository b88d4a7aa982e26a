"""The localization verdict: the FIRST judged op under the threshold in graph order (not the worst),
its evidence as JSON at the byte boundary, and the CLI's exit codes (0 none, 1 departed, 2 undecidable)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.checks.localize import DebugFiles, debug_buffer_size, judge
from harness.checks.localize.cli import main
from harness.errors import ArtifactError
from harness.evidence import Localization, OpGap, Outcome


def op(i: int, db: float, judged: bool = True, layer: str = "layers.0") -> OpGap:
    return OpGap(index=i, node=f"aten_op_{i}", target="aten.mul.Tensor", layer=layer, sqnr_db=db, cosine=0.9,
                 saturation=0.0, judged=judged, unjudged="" if judged else "a dtype cast")


def test_the_first_op_under_the_threshold_is_named_not_the_worst() -> None:
    ops = [op(3, 2.0, layer="layers.2"), op(0, 60.0), op(1, 12.0, layer="layers.1"), op(2, 55.0)]
    result = judge(ops, "16a8w", threshold_db=20.0)
    assert result.outcome is Outcome.DEPARTED
    assert result.first is not None and result.first.node == "aten_op_1" and result.first.layer == "layers.1"
    assert [o.node for o in result.following] == ["aten_op_2", "aten_op_3"]
    assert result.worst is not None and result.worst.node == "aten_op_3"


def test_unjudged_ops_are_shown_but_never_named() -> None:
    result = judge([op(0, 0.0, judged=False), op(1, 40.0)], "16a4w", threshold_db=20.0)
    assert result.outcome is Outcome.NONE and result.first is None and len(result.ops) == 2


def test_nothing_judged_is_undecidable() -> None:
    result = judge([op(0, 0.0, judged=False)], "8a8w", threshold_db=20.0)
    assert result.outcome is Outcome.UNDECIDABLE and "no quantized QNN op" in result.reason


def test_evidence_round_trips_through_json() -> None:
    result = judge([op(0, 60.0), op(1, 3.5, layer="layers.1"), op(2, 1.0)], "16a8w", threshold_db=20.0)
    again = Localization.from_json(result.to_json())
    assert again == result
    assert json.loads(result.to_json())["first"]["node"] == "aten_op_1"


def test_the_debug_buffer_is_sized_from_the_program() -> None:
    small = {"nodes": [{"shape": [1, 1, 64]}]}
    big = {"nodes": [{"shape": [1, 1, 64]}, {"shape": [1, 2, 128, 32]} ] * 200}
    assert debug_buffer_size(big) > debug_buffer_size(small) and debug_buffer_size(big) >= 200 * 4 * 8192


def test_a_lone_pte_says_how_to_rebuild(tmp_path: Path) -> None:
    (tmp_path / "model.pte").write_bytes(b"pte")
    with pytest.raises(ArtifactError, match="--debug-program"):
        DebugFiles(tmp_path).require_build()


def test_cli_undecidable_without_the_run_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "qnn_encodings.json").write_text(json.dumps({"format": "16a8w", "nodes": []}))
    assert main([str(tmp_path), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["outcome"] == "undecidable" and "etdump.etdp" in out["reason"]
    assert main([str(tmp_path / "absent")]) == 2


def test_importing_executorchs_debugger_leaves_the_processs_logging_alone() -> None:
    """ExecuTorch's QNN debugger calls logging.basicConfig(INFO) at import: a night's console would
    print every INFO line after its first localization. Run in a child: the import happens once."""
    import subprocess
    import sys

    pytest.importorskip("executorch.devtools", reason="needs the executorch extra (pip install -e '.[qnn]')")
    code = ("import logging; from harness.checks.localize.compare import _import_debugger; root = logging.getLogger();"
            "_import_debugger(); print(len(root.handlers), root.level)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["0", str(30)], res.stdout  # no handler added, WARNING as Python starts


def _node(name: str, target: str, inputs: list[str], shape: list[int] | None = None) -> dict[str, object]:
    return {"name": name, "target": target, "inputs": inputs, "shape": shape or [1, 1, 64],
            "quant": {"scale": 0.01, "zero_point": 0, "quant_min": 0, "quant_max": 65535, "dtype": "int32"}}


def test_the_kv_cache_taint_ends_where_attention_weighs_the_value_cache() -> None:
    """A one-token decode step reads the whole value cache through softmax @ V: the unwritten slots
    get weight 0 there, so that product and what follows it are judged (the fault after it too)."""
    from harness.checks.localize.compare import _state_path, _why_unjudged

    nodes = [_node("aten_index_put_default", "aten.index_put.default", ["k"]),
             _node("aten_index_put_default_1", "aten.index_put.default", ["v"]),
             _node("aten_matmul_default", "aten.matmul.default", ["q", "aten_index_put_default"]),
             _node("aten__softmax_default", "aten._softmax.default", ["aten_matmul_default"]),
             _node("aten_cat_default_1", "aten.cat.default", ["aten_index_put_default_1"]),
             _node("aten_matmul_default_1", "aten.matmul.default", ["aten__softmax_default", "aten_cat_default_1"]),
             _node("aten_mul_tensor_33", "aten.mul.Tensor", ["aten_matmul_default_1"])]
    state = _state_path(nodes)
    assert state == {"aten_index_put_default", "aten_index_put_default_1", "aten_matmul_default", "aten_cat_default_1"}
    assert _why_unjudged(nodes[-1], 3.0, state) == ""
    assert "unwritten" in _why_unjudged(nodes[4], 1.0, state)


def test_an_op_of_a_few_values_is_shown_but_not_judged() -> None:
    from harness.checks.localize.compare import _why_unjudged

    mean = _node("aten_mean_dim", "aten.mean.dim", ["aten_mul_tensor"], shape=[1, 1, 1])
    assert "1 value(s)" in _why_unjudged(mean, 12.6, set())
    assert _why_unjudged(_node("aten_mean_dim", "aten.mean.dim", ["x"], shape=[1, 16, 1]), 12.6, set()) == ""


@pytest.mark.parametrize("fmt, healthy_floor, fault", [
    ("16a4w", 12.3, 3.9), ("8a8w", 7.2, 3.9), ("16a8w", 20.1, 9.9), ("16a16w", 20.1, 9.9), ("16a4w_block", 7.2, 3.9)])
def test_the_default_lines_pass_trained_weights_and_name_the_seed_fault(fmt: str, healthy_floor: float,
                                                                        fault: float) -> None:
    """The measured extremes (docs/executorch-reference.md#calibration, docs/etllama.md): the lowest
    healthy op of SmolLM2's trained weights (through export_llm; 8a8w through the example decoder) is
    clean on the format's default line; behind it, the mildest fault measured in the format is named
    (16a8w: the seed's earlier form, 9.9 dB). 16a16w is held to 16a8w's figures; a format never
    calibrated gets the most lenient line."""
    assert judge([op(0, 60.0), op(1, healthy_floor)], fmt).outcome is Outcome.NONE
    named = judge([op(0, healthy_floor), op(1, fault, layer="layers.1"), op(2, 1.0)], fmt)
    assert named.outcome is Outcome.DEPARTED and named.first is not None and named.first.node == "aten_op_1"
