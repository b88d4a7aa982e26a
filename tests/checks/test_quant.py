"""harness.checks.quant on the real SmolLM2 NPU export's graph (fixtures copy) and on
small hand-built graphs for each fault kind."""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.checks import quant
from harness.errors import ArtifactError
from harness.mnn_graph import load_graph_json

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "models" / "smollm2-llm.mnn.json.gz"
SHARED_MODEL = REPO / ".." / "shared" / "models" / "smollm2-135m-instruct-mnn-npu16"


@pytest.fixture(scope="module")
def real_graph() -> dict[str, Any]:
    return load_graph_json(FIXTURE)


@pytest.fixture(scope="module")
def real_report(real_graph: dict[str, Any]) -> quant.QuantReport:
    return quant.analyze(real_graph, source=str(FIXTURE))


def _qi(scale: float, zero: float) -> dict[str, Any]:
    return {"scale": scale, "zero": zero, "min": -32767, "max": 32767, "type": "DT_INT16"}


def _set_param(graph: dict[str, Any], tensor: str, scale: float, zero: float) -> None:
    idx = graph["tensorName"].index(tensor)
    for entry in graph["extraTensorDescribe"]:
        if entry["index"] == idx:
            entry["quantInfo"] = _qi(scale, zero)
            return
    graph["extraTensorDescribe"].append({"index": idx, "quantInfo": _qi(scale, zero)})


def _corrected(graph: dict[str, Any], report: quant.QuantReport, use: str) -> dict[str, Any]:
    """The fix the check asks for: each MLP product gets its own range (the calibrated down_proj
    input, or the derived fallback) along the whole chain; integer tensors lose quantInfo."""
    fixed = copy.deepcopy(graph)
    for m in report.mlp_muls:
        if use == "calibrated":
            p = m.hops[-1].params
            assert p is not None
            scale, zero = p.scale, p.zero
        else:
            fallback = m.fallback_scale
            assert fallback is not None and m.derived_min is not None
            scale, zero = fallback, round(m.derived_min / fallback)
        for hop in m.hops:
            _set_param(fixed, hop.tensor, scale, zero)
    ints = set().union(*quant.integer_tensors(graph).values())
    fixed["extraTensorDescribe"] = [e for e in fixed["extraTensorDescribe"] if e["index"] not in ints]
    return fixed


# ----------------------------------------------------------------------------- real export

def test_real_export_reports_inherited_mlp_mul_scales(real_report: quant.QuantReport) -> None:
    r = real_report
    assert (r.mlp_mul_total, r.mlp_mul_inherited, r.mlp_mul_missing) == (30, 30, 0)
    assert r.down_proj_mismatch == 30
    m2 = r.mul_for_layer(2)
    assert m2 is not None and m2.output == "/blocks.2/mlp/Mul_output_0"
    assert m2.output_params is not None
    assert m2.output_params.scale == 0.0002167140263354941
    assert m2.output_params.zero == -1285
    assert m2.inherited_from == "/blocks.2/mlp/act_fn/Mul_output_0"
    act = m2.input_params[m2.inputs.index("/blocks.2/mlp/act_fn/Mul_output_0")]
    assert act is not None
    assert act.scale == m2.output_params.scale and act.zero == m2.output_params.zero
    # down_proj walk: pre_reshape keeps the copied range, the calibrated pre_convert does not
    assert [h.producer for h in m2.hops] == ["BinaryOp", "Reshape", "ConvertTensor"]
    assert m2.down_proj == "/layers.2/mlp/down_proj/Linear"
    assert m2.hops[-1].params is not None
    assert m2.hops[-1].params.scale == 0.001374504372831103 and m2.down_proj_agrees is False
    # fallback for the never-calibrated product: s_a * s_b * 32767
    s_a, s_b = (p.scale for p in m2.input_params if p is not None)
    assert m2.fallback_scale == pytest.approx(s_a * s_b * 32767, rel=1e-12)
    assert m2.derived_min is not None and m2.derived_max is not None
    assert m2.derived_min < 0 < m2.derived_max
    msgs = [f.message for f in r.findings if f.kind == "mlp_mul_inherited" and f.where.layer == 2]
    assert len(msgs) == 1 and "0.0002167140263354941" in msgs[0] and "-1285" in msgs[0]


def test_real_export_integer_tensors_and_coverage(real_report: quant.QuantReport) -> None:
    r = real_report
    k = r.integer_by_kind
    assert (k["shape_output"].quantized, k["rank_output"].quantized, k["gather_index"].quantized) == (181, 91, 122)
    assert (r.quantized_tensors, r.total_tensors) == (3369, 3562)
    assert (r.rope_mul_with_params, r.rope_mul_total) == (120, 120)
    assert r.mlp_mul_with_params == 30
    assert "position_ids" not in k["int_input"].examples and "logits_index" in k["int_input"].examples
    assert r.integer_tensors_quantized >= 181 + 91 + 122
    assert not r.passed
    kinds = {f.kind for f in r.findings if f.severity == "error"}
    assert kinds == {"mlp_mul_inherited", "down_proj_mismatch", "integer_quantized"}


def test_integer_detection_never_takes_float_activations(real_graph: dict[str, Any]) -> None:
    ints = set().union(*quant.integer_tensors(real_graph).values())
    float_producers = {"Convolution", "LayerNorm", "Attention", "UnaryOp"}
    for op in real_graph["oplists"]:
        if op["type"] in float_producers:
            assert not ints & set(op["outputIndexes"]), op["name"]
    names = real_graph["tensorName"]
    for name in ("Shape21", "Rank23", "BinaryOp35", "position_ids", "logits_index"):
        assert names.index(name) in ints
    for name in ("input_ids", "attention_mask", "/blocks.2/mlp/Mul_output_0", "logits"):
        assert names.index(name) not in ints


def test_assert_quant_ok_explains_the_failure(real_report: quant.QuantReport) -> None:
    with pytest.raises(AssertionError) as exc:
        quant.assert_quant_ok(real_report)
    text = str(exc.value)
    assert "30 mlp_mul_inherited, 30 down_proj_mismatch" in text
    assert "181 of 181 Shape outputs" in text and "91 of 91 Rank outputs" in text
    assert "122 of 122 Gather index inputs" in text and "layer 2" in text


@pytest.mark.parametrize("use", ["calibrated", "fallback"])
def test_corrected_variant_passes(real_graph: dict[str, Any], real_report: quant.QuantReport, use: str) -> None:
    fixed = quant.analyze(_corrected(real_graph, real_report, use), source=f"corrected-{use}")
    quant.assert_quant_ok(fixed)
    assert fixed.mlp_mul_inherited == 0 and fixed.down_proj_mismatch == 0 and fixed.integer_tensors_quantized == 0
    # nothing float lost its quantization: coverage is intact
    assert fixed.float_tensors_quantized == real_report.float_tensors_quantized
    assert (fixed.mlp_mul_with_params, fixed.rope_mul_with_params) == (30, 120)
    assert quant.compare_coverage(fixed, real_report) == []


def test_fix_that_drops_coverage_shows_up(real_graph: dict[str, Any], real_report: quant.QuantReport) -> None:
    fixed = _corrected(real_graph, real_report, "calibrated")
    names = fixed["tensorName"]
    drop = {names.index("/blocks.3/self_attn/Mul_output_0"), names.index("/blocks.3/mlp/Mul_output_0"),
            names.index("/blocks.3/input_layernorm/Mul_1_output_0")}
    fixed["extraTensorDescribe"] = [e for e in fixed["extraTensorDescribe"] if e["index"] not in drop]
    r = quant.analyze(fixed, source="lossy")
    kinds = {f.kind for f in r.findings}
    assert {"rope_mul_missing", "mlp_mul_missing"} <= kinds and not r.passed
    assert r.float_tensors_quantized == real_report.float_tensors_quantized - 3
    drops = quant.compare_coverage(r, real_report)
    assert len(drops) == 3 and all(f.kind == "coverage_drop" for f in drops)


# ----------------------------------------------------------------------------- small graphs

def _mini(mul_q: dict[str, Any] | None, conv_in_q: dict[str, Any] | None,
          shape_q: bool = False, rope_q: bool = True) -> dict[str, Any]:
    """gate/up -> Mul -> pre_reshape -> pre_convert -> down_proj conv, plus a Shape and a RoPE Mul."""
    names = ["x", "/blocks.0/mlp/act_fn/Mul_output_0", "/blocks.0/mlp/up_proj/FakeLinear_output_0",
             "/blocks.0/mlp/Mul_output_0", "/layers.0/mlp/down_proj/Linear/pre_reshape",
             "/layers.0/mlp/down_proj/Linear/pre_convert", "/layers.0/mlp/down_proj/Linear",
             "/blocks.0/self_attn/Shape_output_0", "/blocks.0/self_attn/Mul_output_0", "cos"]
    mul = {"type": "BinaryOp", "main": {"opType": "MUL"}}
    ops = [
        {"type": "Input", "name": "x", "outputIndexes": [0], "main": {"dtype": "DT_FLOAT"}},
        {"type": "UnaryOp", "name": names[1], "inputIndexes": [0], "outputIndexes": [1], "main": {"opType": "SILU"}},
        {"type": "Reshape", "name": "up", "inputIndexes": [0], "outputIndexes": [2]},
        {**mul, "name": names[3], "inputIndexes": [1, 2], "outputIndexes": [3]},
        {"type": "Reshape", "name": names[4], "inputIndexes": [3], "outputIndexes": [4]},
        {"type": "ConvertTensor", "name": names[5], "inputIndexes": [4], "outputIndexes": [5]},
        {"type": "Convolution", "name": names[6], "inputIndexes": [5], "outputIndexes": [6]},
        {"type": "Shape", "name": names[7], "inputIndexes": [0], "outputIndexes": [7]},
        {"type": "Input", "name": "cos", "outputIndexes": [9], "main": {"dtype": "DT_FLOAT"}},
        {**mul, "name": names[8], "inputIndexes": [0, 9], "outputIndexes": [8]},
    ]
    q = {0: _qi(0.01, -100), 1: _qi(0.0002, -1285), 2: _qi(0.0003, -30000), 6: _qi(0.009, -11000)}
    if mul_q is not None:
        q[3] = q[4] = mul_q
    if conv_in_q is not None:
        q[5] = conv_in_q
    if shape_q:
        q[7] = _qi(1.0, 0)
    if rope_q:
        q[8] = _qi(0.01, -100)
    return {"oplists": ops, "tensorName": names,
            "extraTensorDescribe": [{"index": i, "quantInfo": v} for i, v in sorted(q.items())]}


def test_mini_graph_with_own_range_passes() -> None:
    own = _qi(0.0015, -20000)
    r = quant.analyze(_mini(own, own))
    assert r.passed, r.findings
    assert (r.mlp_mul_total, r.mlp_mul_inherited, r.rope_mul_with_params) == (1, 0, 1)


def test_mini_graph_inherited_scale() -> None:
    r = quant.analyze(_mini(_qi(0.0002, -1285), _qi(0.0002, -1285)))
    assert [f.kind for f in r.findings] == ["mlp_mul_inherited"]
    assert r.mlp_muls[0].inherited_from == "/blocks.0/mlp/act_fn/Mul_output_0"


def test_mini_graph_missing_mul_range_reports_fallback() -> None:
    r = quant.analyze(_mini(None, _qi(0.0015, -20000)))
    f = [f for f in r.findings if f.kind == "mlp_mul_missing"]
    assert len(f) == 1 and not r.passed
    assert r.mlp_muls[0].fallback_scale == pytest.approx(0.0002 * 0.0003 * 32767)
    assert f"{0.0002 * 0.0003 * 32767:.6g}" in f[0].message


def test_mini_graph_down_proj_disagrees() -> None:
    r = quant.analyze(_mini(_qi(0.0015, -20000), _qi(0.0014, -20000)))
    f = [f for f in r.findings if f.kind == "down_proj_mismatch"]
    assert len(f) == 1 and f[0].where.tensor == "/layers.0/mlp/down_proj/Linear/pre_convert"


def test_mini_graph_integer_and_rope_faults() -> None:
    own = _qi(0.0015, -20000)
    r = quant.analyze(_mini(own, own, shape_q=True, rope_q=False))
    kinds = sorted(f.kind for f in r.findings)
    assert kinds == ["integer_quantized", "rope_mul_missing"]
    assert r.integer_by_kind["shape_output"].quantized == 1


def test_graph_without_quant_info_fails_clearly() -> None:
    g = _mini(None, None, rope_q=False)
    g["extraTensorDescribe"] = []
    r = quant.analyze(g)
    assert r.findings[0].kind == "no_quant_info" and "--smooth" in r.findings[0].message


# ----------------------------------------------------------------------------- loading and CLI

def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.checks.quant", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_cli_json_on_real_export() -> None:
    proc = _cli(str(FIXTURE), "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)   # exactly one JSON object
    assert data["passed"] is False
    assert (data["quantized_tensors"], data["mlp_mul_total"], data["mlp_mul_inherited"]) == (3369, 30, 30)
    assert data["integer_by_kind"]["shape_output"]["quantized"] == 181
    per_kind = [v["quantized"] for v in data["integer_by_kind"].values()]
    # kinds overlap (a Const can be a Reshape shape input): the total counts each tensor once
    assert max(per_kind) <= data["integer_tensors_quantized"] <= sum(per_kind)
    layer2 = next(m for m in data["mlp_muls"] if m["layer"] == 2)
    assert layer2["output_params"]["scale"] == 0.0002167140263354941


def test_cli_text_and_corrected_file(tmp_path: Path, real_graph: dict[str, Any],
                                     real_report: quant.QuantReport) -> None:
    proc = _cli(str(FIXTURE))
    assert proc.returncode == 1 and "FAILED" in proc.stdout
    assert "/blocks.2/mlp/Mul_output_0 (scale 0.0002167140263354941, zero -1285)" in proc.stdout
    good = tmp_path / "llm.mnn.json.gz"
    good.write_bytes(gzip.compress(json.dumps(_corrected(real_graph, real_report, "calibrated")).encode()))
    proc = _cli(str(good), "--baseline", str(FIXTURE))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.rstrip().endswith("PASSED")


@pytest.mark.parametrize("content", [b"", b"not json", b"\x1f\x8b\x08broken", b"[1, 2]", b'{"oplists": 3}'])
def test_bad_files_exit_2_with_a_message(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "llm.mnn.json"
    bad.write_bytes(content)
    proc = _cli(str(bad), "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert str(bad) in proc.stderr and "Traceback" not in proc.stderr


def test_missing_file_exit_2(tmp_path: Path) -> None:
    proc = _cli(str(tmp_path / "nope.json.gz"))
    assert proc.returncode == 2 and "no such file" in proc.stderr
    with pytest.raises(ArtifactError):
        load_graph_json(tmp_path)


def test_malformed_graph_is_an_artifact_error(tmp_path: Path) -> None:
    bad = tmp_path / "g.json"
    bad.write_text(json.dumps({"oplists": [], "tensorName": ["a"],
                               "extraTensorDescribe": [{"index": 0, "quantInfo": {"scale": "x"}}]}))
    with pytest.raises(ArtifactError, match="malformed"):
        quant.check_file(bad)


def test_reads_llm_mnn_through_the_converter() -> None:
    llm_mnn = SHARED_MODEL / "llm.mnn"
    if not llm_mnn.is_file():
        pytest.skip(f"{llm_mnn} absent (needs the sibling ../shared of the repo)")
    pytest.importorskip("_tools", reason="the mnn package (its converter) is not installed")
    r = quant.check_file(llm_mnn)
    assert r.scale_precision == "6 decimals"
    assert (r.quantized_tensors, r.mlp_mul_inherited) == (3369, 30)
    assert r.integer_by_kind["rank_output"].quantized == 91
    assert any(f.kind == "low_precision" for f in r.findings)
