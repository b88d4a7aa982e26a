"""Static shape guards on generated exports, and the runtime log scan on the real error strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.checks.shapes import (
    GUARD_NO_DEEPSTACK,
    GUARD_NO_IMAGE_EMBEDS,
    WARNING,
    assert_shapes_ok,
    check_export_shapes,
    parse_hw_tags,
    parse_image_sizes,
    scan_log_for_shape_errors,
)
from harness.errors import ArtifactError
from virtual_lab.exports import edit_stub, make_qwen3_export, make_qwen3_vl_export, set_compiled_dims

SMALL = 0.5  # MiB: the checks read JSON only


def kinds(findings) -> set[str]:
    return {f.kind for f in findings}


@pytest.fixture(scope="module")
def good_vl(tmp_path_factory):
    # compiled for 512 wide x 384 high: --image_sizes 512x384, prompts <hw>384, 512</hw>
    return make_qwen3_vl_export(tmp_path_factory.mktemp("e") / "Qwen3-VL-2B-MNN", size_mb=SMALL,
                                image_sizes=["512x384"])


def test_good_exports_pass(good_vl, tmp_path: Path) -> None:
    findings = check_export_shapes(good_vl.path, image_sizes="512x384",
                                   prompts=["<img><hw>384, 512</hw>cat.jpg</img>Describe it"],
                                   soc_id=69, dsp_arch="v79")
    assert findings == []
    assert_shapes_ok(findings)
    text = make_qwen3_export(tmp_path / "qwen3", size_mb=SMALL)
    assert check_export_shapes(text.path) == []
    assert check_export_shapes(text.path, "config_qnn.json") == []


def test_deepstack_placeholder_caught(tmp_path: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "m", size_mb=SMALL, deepstack_placeholder=True)
    found = [f for f in check_export_shapes(info.path, "config_qnn.json")
             if f.kind == "deepstack_placeholder"]
    assert [f.expected for f in found] == ["[3,128,2048]", "[3,1,2048]"]  # prefill, decode
    # read from the NPU stub (its binaries re-read by QNN where the host has it), not the sidecar
    assert all(f.where.file == "qnn/llm.mnn" and f.source in ("stub", "libQnnSystem") and "[3,1,1]" in str(f.found)
               for f in found)
    with pytest.raises(AssertionError, match=r"deepstack_embeds: expected \[3,128,2048\]"):
        assert_shapes_ok(found)
    # the CPU/CPU config never touches the QNN graphs
    assert check_export_shapes(info.path, "config.json") == []


def test_missing_deepstack_feature_caught(tmp_path: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "m", size_mb=SMALL, visual_outputs=("image_embeds",))
    for cfg in ("config_qnn.json", "config_cpu_llm_qnn_visual.json"):
        found = check_export_shapes(info.path, cfg)
        assert kinds(found) == {"visual_output_missing"}
        assert "deepstack_feature" in str(found[0].expected) and found[0].found == "image_embeds"
    assert check_export_shapes(info.path, "config_qnn_cpu_visual.json") == []  # visual on CPU


def test_chunk_mismatch_caught(tmp_path: Path) -> None:
    info = make_qwen3_export(tmp_path / "m", size_mb=SMALL, chunk_limits=[256, 1])
    found = check_export_shapes(info.path)
    assert [(f.kind, f.where.file, f.where.key) for f in found] == [("chunk_mismatch", "config_qnn.json", "chunk_limits")]
    assert found[0].expected == "[128, 1]" and found[0].found == "[256, 1]"
    extra = make_qwen3_export(tmp_path / "x", size_mb=SMALL, chunk_limits=[128, 64, 1])
    assert kinds(check_export_shapes(extra.path)) == {"chunk_mismatch"}


def test_chunk_limits_malformed_or_absent(tmp_path: Path) -> None:
    info = make_qwen3_export(tmp_path / "m", size_mb=SMALL)
    cfg_path = info.path / "config_qnn.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chunk_limits"] = [128]
    cfg_path.write_text(json.dumps(cfg))
    assert "size_limit must be array larger than 1" in check_export_shapes(info.path)[0].hint
    del cfg["chunk_limits"]
    cfg["backend_type"] = "npu"
    cfg_path.write_text(json.dumps(cfg))
    assert kinds(check_export_shapes(info.path)) == {"chunk_limits", "backend_type"}


def test_image_size_mismatch_and_axis_order(good_vl) -> None:
    # --image_sizes is WxH: the transposed 384x512 is a different graph
    found = check_export_shapes(good_vl.path, "config_qnn.json", image_sizes="384x512")
    assert kinds(found) == {"image_size_mismatch"}
    assert "WIDTH x HEIGHT" in found[0].hint
    # <hw> is HEIGHT, WIDTH: <hw>512, 384</hw> asks for 384 wide x 512 high
    found = check_export_shapes(good_vl.path, "config_qnn.json",
                                prompts=["<img><hw>512, 384</hw>a.jpg</img>What is it?"])
    assert kinds(found) == {"image_size_mismatch"}
    assert "write <hw>384, 512</hw>" in found[0].hint
    # a size that rounds onto the compiled grid is fine; one that does not is not
    assert check_export_shapes(good_vl.path, "config_qnn.json",
                               prompts=["<img><hw>390, 500</hw>a.jpg</img>x"]) == []
    assert kinds(check_export_shapes(good_vl.path, "config_qnn.json",
                                     prompts=["<img><hw>224, 224</hw>a.jpg</img>x"])) == {"image_size_mismatch"}
    # no <hw>: only a warning
    found = check_export_shapes(good_vl.path, "config_qnn.json", prompts=["<img>a.jpg</img>x"])
    assert [f.severity for f in found] == [WARNING]
    assert_shapes_ok(found)
    with pytest.raises(AssertionError):
        assert_shapes_ok(found, allow_warnings=False)


def test_wrong_compiled_image_sizes(tmp_path: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "m", size_mb=SMALL, image_sizes=[(448, 448)])
    found = check_export_shapes(info.path, "config_cpu_llm_qnn_visual.json", image_sizes="512x384")
    assert kinds(found) == {"image_size_mismatch"} and "448x448" in str(found[0].found)


def test_model_type_comes_from_llm_config_not_folder_name(tmp_path: Path) -> None:
    vl = make_qwen3_vl_export(tmp_path / "plain-model-dir", size_mb=SMALL, deepstack_placeholder=True)
    assert "deepstack_placeholder" in kinds(check_export_shapes(vl.path))
    text = make_qwen3_export(tmp_path / "Qwen3-VL-looking-name", size_mb=SMALL)
    assert check_export_shapes(text.path) == []


def test_position_ids_must_be_3d_for_mrope(tmp_path: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "m", size_mb=SMALL, sidecar=False)
    # what upstream compiles for a folder without "VL" in its name
    edit_stub(info.path / "qnn/llm.mnn", lambda g: set_compiled_dims(g, "position_ids", [[1, 128], [1, 1]]))
    found = [f for f in check_export_shapes(info.path, "config_qnn.json") if f.kind == "position_ids_shape"]
    assert [f.expected for f in found] == ["[3,128]", "[3,1]"]
    assert "'Qwen' and 'VL'" in found[0].hint


def test_hidden_mismatch_and_unexpected_deepstack(tmp_path: Path) -> None:
    info = make_qwen3_export(tmp_path / "m", size_mb=SMALL)
    edit_stub(info.path / "qnn/llm.mnn", lambda g: set_compiled_dims(g, "input_ids", [[128, 1, 2048], [1, 1, 2048]]))
    found = check_export_shapes(info.path, "config_qnn.json")
    assert kinds(found) == {"hidden_mismatch"} and [f.where.key.split()[1] for f in found] == ["0", "1"]
    # a deepstack input compiled into a model whose llm_config.json says it has none
    vl = make_qwen3_vl_export(tmp_path / "vl", size_mb=SMALL, sidecar=False)
    cfg = json.loads((vl.path / "llm_config.json").read_text())
    cfg.update(model_type="qwen2_5_vl", has_deepstack=False)
    (vl.path / "llm_config.json").write_text(json.dumps(cfg))
    found = check_export_shapes(vl.path, "config_qnn.json")
    assert kinds(found) == {"deepstack_unexpected"}
    assert {f.severity for f in found} == {WARNING}


def test_missing_files_and_manifest(tmp_path: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "m", size_mb=SMALL,
                                missing=["llm.mnn.weight", "qnn/graphvisual0.bin"])
    found = check_export_shapes(info.path, "config_qnn.json")
    assert {(f.kind, f.where.key) for f in found} == {("missing_file", "llm_weight"),
                                                 ("missing_binary", "context binaries")}
    assert "empty file" in [f for f in found if f.where.key == "llm_weight"][0].hint
    assert [f.found for f in found if f.kind == "missing_binary"] == ["1 missing: qnn/graphvisual0.bin"]
    # no sidecar: the stub is enough
    nomani = make_qwen3_export(tmp_path / "n", size_mb=SMALL, sidecar=False)
    assert check_export_shapes(nomani.path) == []
    # neither stub nor sidecar: the IO is unknown (a warning), the stub itself is missing
    bare = make_qwen3_export(tmp_path / "b", size_mb=SMALL, sidecar=False, missing=["qnn/llm.mnn"])
    found = check_export_shapes(bare.path)
    assert {(f.kind, f.severity) for f in found} == {("io_unknown", WARNING), ("missing_file", "error")}
    assert "docs/qnn-export-artifacts.md" in [f for f in found if f.kind == "io_unknown"][0].hint


def test_sidecar_is_the_fallback_without_a_stub(tmp_path: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "m", size_mb=SMALL, deepstack_placeholder=True,
                                missing=["qnn/llm.mnn"])
    found = [f for f in check_export_shapes(info.path, "config_qnn.json") if f.kind == "deepstack_placeholder"]
    assert [(f.where.file, f.source) for f in found] == [("qnn/export_manifest.json", "sidecar")] * 2


def test_target_soc_mismatch(good_vl) -> None:
    found = check_export_shapes(good_vl.path, "config_qnn.json", soc_id=57, dsp_arch="75")
    assert {(f.kind, f.where.key) for f in found} == {("target_mismatch", "soc_id"), ("target_mismatch", "dsp_arch")}


def test_soc_arch_pair_must_exist(tmp_path: Path) -> None:
    # Only a sidecar can record an impossible pair: a real binary's socModel implies its arch.
    # Stand-in binaries, so the sidecar is the target wherever the host's QNN refuses them.
    info = make_qwen3_export(tmp_path / "m", size_mb=SMALL, soc_id=69, dsp_arch="v75", qnn_binaries="stand-in")
    found = [f for f in check_export_shapes(info.path) if f.kind != "io_unreadable"]
    assert [(f.kind, str(f.expected).split()[0], f.source) for f in found] == [("target_inconsistent", "v79", "sidecar")]


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="does not exist"):
        check_export_shapes(tmp_path / "nope")
    info = make_qwen3_export(tmp_path / "m", size_mb=SMALL)
    (info.path / "config_qnn.json").write_text("{not json")
    found = check_export_shapes(info.path, "config_qnn.json")
    assert [(f.kind, f.where.file) for f in found] == [("bad_json", "config_qnn.json")]
    (info.path / "llm_config.json").unlink()
    assert [(f.kind, f.where.file) for f in check_export_shapes(info.path)] == [("missing_file", "llm_config.json")]
    with pytest.raises(ArtifactError, match="width first"):
        parse_image_sizes("512*384")
    with pytest.raises(ArtifactError, match="height first"):
        parse_hw_tags("<img><hw>384</hw>a.jpg</img>")


def test_parsers_keep_axis_order() -> None:
    assert parse_image_sizes("512x384, 224x224") == [(512, 384), (224, 224)]
    assert parse_hw_tags("<img><hw>384, 512</hw>a.jpg</img> and <img>b.jpg</img>") == [(384, 512), None]


def test_assert_message_names_file_key_expected_found_and_fix(tmp_path: Path) -> None:
    info = make_qwen3_export(tmp_path / "m", size_mb=SMALL, chunk_limits=[256, 1])
    with pytest.raises(AssertionError) as err:
        assert_shapes_ok(check_export_shapes(info.path))
    msg = str(err.value)
    assert "config_qnn.json: chunk_limits: expected [128, 1], found [256, 1]" in msg
    assert "what to do:" in msg and "--chunk_size 256" in msg


# ---- runtime log scan ------------------------------------------------------------------------

REAL_LINES = {
    "broadcast": "Broad cast error, dim1 = 3, dim2 = 4",
    "compute_shape": "Compute Shape Error for /layers.0/Add_output_0",
    "compute_size_code": "code=3 in onForward, 512",
    "no_outputs": "[Error]: onForward returned no outputs. seqLen=128, inDecode=0, inputs=5, moduleKey=(128,0)",
    "qnn_plugin_shape": "MNN_QNN: Failed to compute shape for Plugin Op.",
    "qnn_raw_shape": "MNN_QNN: Failed to find raw shape deepstack_embeds.",
    "qnn_plugin_attr": "MNN_QNN: Incorrect Plugin Op, can't find 'allInputShape' attr.",
    "qnn_validate_binary": "QNN: Failed to validate binary: 5005",
    "graph_io_missing": "qnn/plugin/op, can't find 4 input: deepstack_embeds",
    "qnn_kv": "QNN: Error: KV length 4097 larger than max size = 4096",
    "qnn_error_code": "Error in file /src/QNNBackend.cpp, line 812: error code 6004",
    "image_dropped": "Omni Can't open image",
    "visual_guard": f"[Error]: {GUARD_NO_DEEPSTACK}: outputs=1",
}


def test_log_scan_finds_each_real_error_string() -> None:
    for kind, line in REAL_LINES.items():
        found = scan_log_for_shape_errors(f"config path is model/config_qnn.json\n{line}\n")
        assert [(f.kind, f.where.line_no) for f in found] == [(kind, 2)], line


def test_log_scan_real_sequence_and_hints() -> None:
    log = "\n".join([
        "prompt file is prompt.txt",
        REAL_LINES["broadcast"], REAL_LINES["compute_shape"], REAL_LINES["compute_size_code"],
        REAL_LINES["no_outputs"], "Error: Response generation failed due to internal error",
        f"logcat: E MNNJNI: {GUARD_NO_IMAGE_EMBEDS}",
        REAL_LINES["qnn_error_code"],
    ])
    found = scan_log_for_shape_errors(log, source="oneplus13 stdout")
    assert [f.kind for f in found] == ["broadcast", "compute_shape", "compute_size_code", "no_outputs",
                                       "visual_guard", "qnn_error_code"]
    assert "IO does not match" in found[-1].hint
    with pytest.raises(AssertionError, match="oneplus13 stdout line 2: Broad cast error"):
        assert_shapes_ok(found)


def test_log_scan_clean_log() -> None:
    clean = "\n".join([
        "config path is model/config_qnn.json", "mSeqLen[i]=128 in init, 231", "Hi!", "",
        "#################################", "prompt tokens num = 6", "decode tokens num = 5",
        " audio RTF = -nan ", "##################################",
    ])
    assert scan_log_for_shape_errors(clean) == []
