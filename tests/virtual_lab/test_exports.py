"""The export folder generator: real file names and keys, sizes, knobs, behaviour file, CLI."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.checks import mrope
from tests.qnn.material import vlab_real_binaries_or_skip
from virtual_lab.exports import (
    BEHAVIOUR_FILE,
    MANIFEST_PATH,
    TEXT_CONFIGS,
    VL_CONFIGS,
    backend_pair_of,
    binary_target,
    context_binary_utility_json,
    edit_stub,
    load_behaviour,
    main,
    make_qwen3_export,
    make_qwen3_vl_export,
    posdbg_lines,
    read_context_header,
    resolve_answer,
    set_compiled_dims,
    validate_behaviour,
    virtual_prompt_segments,
    write_sdk_tool,
)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def vl(tmp_path_factory):
    return make_qwen3_vl_export(tmp_path_factory.mktemp("vl") / "Qwen3-VL-2B-Instruct-MNN", size_mb=1)


def test_vl_layout_and_configs(vl) -> None:
    files = set(vl.files)
    for name in ["config.json", "config_qnn.json", "config_cpu_llm_qnn_visual.json",
                 "config_qnn_cpu_visual.json", "llm_config.json", "export_args.json", "llm.mnn",
                 "llm.mnn.weight", "tokenizer.mtok", "embeddings_bf16.bin", "visual.mnn",
                 "visual.mnn.weight", "qnn/llm.mnn", "qnn/visual.mnn", "qnn/graphllm0.bin",
                 "qnn/graphllm28.bin", "qnn/graphvisual0.bin", MANIFEST_PATH, BEHAVIOUR_FILE]:
        assert name in files, name
    assert vl.configs == VL_CONFIGS and vl.model_type == "qwen3_vl" and vl.hidden == 2048
    for pair, name in vl.configs.items():
        cfg = _load(vl.path / name)
        assert backend_pair_of(cfg) == pair
        assert cfg["backend_type"] == "cpu" and cfg["llm_weight"] == "llm.mnn.weight"
        assert cfg["tokenizer_file"] == "tokenizer.mtok" and cfg["mllm"]["precision"] == "normal"
        assert ("chunk_limits" in cfg) == pair.endswith("/qnn")  # pairs are visual/llm
    qnn = _load(vl.path / "config_qnn.json")
    assert qnn["llm_model"] == "qnn/llm.mnn" and qnn["visual_model"] == "qnn/visual.mnn"
    assert qnn["chunk_limits"] == [128, 1]
    llm_config = _load(vl.path / "llm_config.json")
    assert llm_config["model_type"] == "qwen3_vl" and llm_config["hidden_size"] == 2048
    assert llm_config["layer_nums"] == 28 and llm_config["is_mrope"] is True
    assert llm_config["is_visual"] and llm_config["has_deepstack"]
    for key in ("image_size", "vision_start", "vision_end", "image_pad", "num_grid_per_side", "jinja"):
        assert key in llm_config
    args = _load(vl.path / "export_args.json")
    assert args["generate_for_npu"] and args["seperate_embed"] and args["sym"]


def test_manifest_records_qnn_args_and_io(vl) -> None:
    m = _load(vl.path / MANIFEST_PATH)
    assert (m["soc_id"], m["dsp_arch"], m["vtcm_mb"], m["chunk_size"]) == (69, "v79", 8, 128)
    assert m["image_sizes"] == ["512x512"]
    prefill, decode = m["io"]["llm"]["configs"]
    shapes = {i["name"]: i["shape"] for i in prefill["inputs"]}
    assert shapes == {"input_ids": [128, 1, 2048], "attention_mask": [1, 1, 128, 128],
                      "position_ids": [3, 128], "logits_index": [1], "deepstack_embeds": [3, 128, 2048]}
    assert {i["name"]: i["shape"] for i in decode["inputs"]}["deepstack_embeds"] == [3, 1, 2048]
    (visual,) = m["io"]["visual"]["configs"]
    assert visual["outputs"] == ["image_embeds", "deepstack_feature"]
    assert visual["inputs"][0] == {"name": "patches", "shape": [1024, 1536]}
    assert "--image_sizes" in m["commands"][1] and m["commands"][0][:2] == ["python3", "generate_llm_qnn.py"]
    assert len(m["graphs"]["llm"]) == 29


def test_context_binary_stand_ins(tmp_path: Path) -> None:
    si = make_qwen3_vl_export(tmp_path / "si", size_mb=0.5, qnn_binaries="stand-in")
    head = read_context_header(si.path / "qnn/graphllm3.bin")
    assert head["graphs"] == ["graphllm3", "graphllm1_3"] and head["dsp_arch"] == "v79"
    two = make_qwen3_vl_export(tmp_path / "two", size_mb=0.5, image_sizes=["512x512", "448x448"],
                               qnn_binaries="stand-in")
    assert read_context_header(two.path / "qnn/graphvisual0.bin")["graphs"] == ["graphvisual0", "graphvisual1_0"]
    assert binary_target(two.path / "qnn/graphvisual0.bin") == (69, "v79")
    with pytest.raises(ValueError, match="bad magic"):
        read_context_header(si.path / "llm.mnn.weight")


@pytest.mark.real_qnn
def test_context_binaries_are_real(vl) -> None:
    """Built by the host's QNN for the export's SoC, with the stub's graph names and dims."""
    from harness.qnn import find_host_qnn, read_context_binary

    vlab_real_binaries_or_skip()
    info = read_context_binary(vl.path / "qnn/graphllm3.bin")
    assert [g.name for g in info.graphs] == ["graphllm3", "graphllm1_3"]
    assert (info.soc_model, info.htp_arch, info.qairt_build) == (69, "v79", find_host_qnn().qairt_build)
    # a deepstack layer: the hidden state, then deepstack_embeds, in the stub's order
    assert [[list(t.dims) for t in g.inputs] for g in info.graphs] == [[[1, 128, 2048], [3, 128, 2048]],
                                                                       [[1, 1, 2048], [3, 1, 2048]]]
    assert binary_target(vl.path / "qnn/graphllm3.bin") == (69, "v79")
    with pytest.raises(ValueError, match="llm.mnn.weight"):
        binary_target(vl.path / "llm.mnn.weight")


def test_text_export(tmp_path: Path) -> None:
    info = make_qwen3_export(tmp_path / "Qwen3-0.6B-MNN", size_mb=0.5, tokenizer="txt",
                             soc_id=57, dsp_arch="75")
    assert info.configs == TEXT_CONFIGS and not info.is_visual and info.hidden == 1024
    assert "visual.mnn" not in info.files and "tokenizer.txt" in info.files
    assert (info.path / "tokenizer.txt").read_bytes().startswith(b"430 ")
    assert _load(info.path / "llm_config.json")["model_type"] == "qwen3"
    m = _load(info.path / MANIFEST_PATH)
    assert (m["soc_id"], m["dsp_arch"]) == (57, "v75") and "visual" not in m["io"]
    shapes = {i["name"]: i["shape"] for i in m["io"]["llm"]["configs"][0]["inputs"]}
    assert shapes["position_ids"] == [1, 128] and "deepstack_embeds" not in shapes


def test_size_budget_and_determinism(tmp_path: Path) -> None:
    # 8 MB: room for the real context binaries (~3 MB of them, never padded) within the budget
    a = make_qwen3_vl_export(tmp_path / "a", size_mb=8)
    on_disk = sum(p.stat().st_size for p in a.path.rglob("*") if p.is_file())
    assert on_disk == a.total_bytes
    assert abs(on_disk - 8 * 2**20) < 0.02 * 8 * 2**20
    b = make_qwen3_vl_export(tmp_path / "b", size_mb=8)
    assert _sha(a.path / "llm.mnn.weight") == _sha(b.path / "llm.mnn.weight")
    assert _sha(a.path / "llm.mnn.weight") != _sha(a.path / "visual.mnn.weight")
    assert _sha(a.path / "qnn/graphllm0.bin") == _sha(b.path / "qnn/graphllm0.bin")
    c = make_qwen3_vl_export(tmp_path / "c", size_mb=8, seed=1)
    assert _sha(a.path / "llm.mnn.weight") != _sha(c.path / "llm.mnn.weight")


def test_fault_knobs_reach_the_files(tmp_path: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "f", size_mb=0.5, deepstack_placeholder=True,
                                visual_outputs=("image_embeds",), chunk_size=64, chunk_limits=[128, 1],
                                image_sizes=[(384, 512)], missing=["llm.mnn.weight"])
    m = _load(info.path / MANIFEST_PATH)
    prefill = {i["name"]: i["shape"] for i in m["io"]["llm"]["configs"][0]["inputs"]}
    assert prefill["deepstack_embeds"] == [3, 1, 1] and prefill["input_ids"][0] == 64
    assert m["io"]["visual"]["configs"][0]["outputs"] == ["image_embeds"]
    assert m["image_sizes"] == ["384x512"] and info.image_sizes == ((384, 512),)
    assert _load(info.path / "config_qnn.json")["chunk_limits"] == [128, 1]
    assert not (info.path / "llm.mnn.weight").exists() and info.missing == ("llm.mnn.weight",)


def test_bad_knobs_raise(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown knobs"):
        make_qwen3_export(tmp_path / "a", size_mb=0.5, deepstack_placeholder=True)
    with pytest.raises(ValueError, match="WxH"):
        make_qwen3_vl_export(tmp_path / "b", image_sizes=["512*512"])
    with pytest.raises(ValueError, match="no such file"):
        make_qwen3_export(tmp_path / "c", size_mb=0.5, missing=["nope.bin"])
    with pytest.raises(ValueError, match="outside"):
        make_qwen3_export(tmp_path / "d", size_mb=0.5, missing=["../x"])
    make_qwen3_export(tmp_path / "e", size_mb=0.5)
    with pytest.raises(ValueError, match="already exists"):
        make_qwen3_export(tmp_path / "e", size_mb=0.5, overwrite=False)


# ---- virtual_behaviour.json -------------------------------------------------------------------


def test_default_behaviour_resolution(vl) -> None:
    beh = load_behaviour(vl.path / BEHAVIOUR_FILE)
    paris = resolve_answer(beh, "What is the capital of France? Answer briefly.", "qnn/qnn")
    assert paris.text == "The capital of France is Paris." and paris.fault is None
    slow = resolve_answer(beh, "What is the capital of France?", "cpu/cpu")
    assert slow.text == paris.text and slow.decode_ms_per_token > paris.decode_ms_per_token
    img = resolve_answer(beh, "<img><hw>512, 512</hw>a.jpg</img>Describe the image.", "cpu/qnn")
    assert "image" in img.text
    other = resolve_answer(beh, "Tell me a joke", "qnn/qnn")
    assert other.text == beh["default"]["text"] and other.posdbg is None


def test_derived_faults(tmp_path: Path) -> None:
    ph = make_qwen3_vl_export(tmp_path / "ph", size_mb=0.5, deepstack_placeholder=True)
    beh = load_behaviour(ph.path / BEHAVIOUR_FILE)
    assert resolve_answer(beh, "capital of France", "qnn/qnn").fault == "shape_error"
    assert resolve_answer(beh, "capital of France", "cpu/qnn").fault == "shape_error"
    assert resolve_answer(beh, "capital of France", "qnn/cpu").fault is None
    nods = make_qwen3_vl_export(tmp_path / "nods", size_mb=0.5, visual_outputs=("image_embeds",))
    beh = load_behaviour(nods.path / BEHAVIOUR_FILE)
    assert resolve_answer(beh, "<img>a.jpg</img>Describe", "qnn/cpu").fault == "shape_error"
    assert resolve_answer(beh, "<img>a.jpg</img>Describe", "cpu/qnn").fault is None
    assert resolve_answer(beh, "capital of France", "qnn/qnn").fault is None
    good = make_qwen3_export(tmp_path / "good", size_mb=0.5)
    beh = load_behaviour(good.path / BEHAVIOUR_FILE)
    assert all(resolve_answer(beh, "capital of France", p).fault is None for p in good.configs)


def test_custom_behaviour_specificity_and_validation(tmp_path: Path) -> None:
    custom = {
        "default": {"text": "hello", "prefill_ms_per_token": 1, "decode_ms_per_token": 10},
        "prompts": {
            "cat": {"*": {"text": "meow", "fault": "poison_next"}},
            "black cat": {"qnn/qnn": {"fault": None, "posdbg": "chunk_local_bug"}},
        },
    }
    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, behaviour=custom)
    beh = load_behaviour(info.path / BEHAVIOUR_FILE)
    a = resolve_answer(beh, "a black cat", "qnn/qnn")
    assert (a.text, a.fault, a.posdbg) == ("meow", None, "chunk_local_bug")  # explicit null wins
    assert resolve_answer(beh, "a black cat", "cpu/cpu").fault == "poison_next"
    with pytest.raises(ValueError, match="fault 'explode'"):
        validate_behaviour({**custom, "prompts": {"x": {"*": {"fault": "explode"}}}})
    with pytest.raises(ValueError, match="not a backend pair"):
        validate_behaviour({**custom, "prompts": {"x": {"npu/npu": {"text": "x"}}}})
    with pytest.raises(ValueError, match="default.text"):
        validate_behaviour({"default": {"prefill_ms_per_token": 1, "decode_ms_per_token": 1}})
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="bad.json"):
        load_behaviour(bad)


# ---- prompt segments and [POSDBG] lines for the virtual runtime -------------------------------


def test_virtual_prompt_segments(vl) -> None:
    llm_config = _load(vl.path / "llm_config.json")
    segs = virtual_prompt_segments("<img><hw>384, 512</hw>cat.jpg</img>Describe it.", llm_config)
    assert segs == [mrope.Text(3), mrope.Image(h=12, w=16), mrope.Text(3 + 5)]
    assert virtual_prompt_segments("Hi there!", {"is_visual": False}) == [mrope.Text(3 + 3 + 5)]
    assert virtual_prompt_segments("<img>a.jpg</img>x", llm_config)[1] == mrope.image_llm_grid(420, 420)


def test_posdbg_lines_check_against_reference(vl) -> None:
    llm_config = _load(vl.path / "llm_config.json")
    prompt = "<img><hw>512, 512</hw>a.jpg</img>" + "word " * 200
    ref = mrope.reference_positions(virtual_prompt_segments(prompt, llm_config))
    good = posdbg_lines(prompt, llm_config, mode="ok", decode_tokens=2)
    assert mrope.check_position_log("\n".join(good), ref) == []
    bad = posdbg_lines(prompt, llm_config, mode="chunk_local_bug", full=False)
    kinds = {f.kind for f in mrope.check_position_log("\n".join(bad), ref)}
    assert kinds == {mrope.CHUNK_LOCAL_BUG}


# ---- CLI ------------------------------------------------------------------------------------


def test_cli(tmp_path: Path, capsys) -> None:
    rc = main(["qwen3-vl", str(tmp_path / "cli"), "--size-mb", "0.5", "--soc-id", "57",
               "--dsp-arch", "v75", "--deepstack-placeholder", "--image-sizes", "448x448"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model_type"] == "qwen3_vl" and out["configs"]["qnn/qnn"] == "config_qnn.json"
    m = _load(tmp_path / "cli" / MANIFEST_PATH)
    assert (m["soc_id"], m["dsp_arch"], m["image_sizes"]) == (57, "v75", ["448x448"])
    rc = main(["qwen3-vl", str(tmp_path / "bad"), "--image-sizes", "448"])
    err = capsys.readouterr().err
    assert rc == 2 and "WxH" in err and "Traceback" not in err


# ---- the NPU stubs ----------------------------------------------------------------------------

REAL_STUB = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "smollm2-qnn-stub-v79" / "qnn" / "llm.mnn"


def _plugin_layout(path: Path) -> tuple[set, set, list]:
    from harness.mnn_graph import dump_mnn

    graph: dict[str, Any] = dump_mnn(path)
    plugins = [op for op in graph["oplists"] if op["type"] == "Plugin"]
    keys = {a["key"] for op in plugins for a in op["main"]["attr"] if not a["key"].startswith("o_")}
    top = {op["type"] for op in graph["oplists"]} - {"Const", "Attention", "StridedSlice"}
    return keys, top, plugins


def test_stub_is_a_real_mnn_model_in_the_compilefornpu_layout(vl) -> None:
    keys, top, plugins = _plugin_layout(vl.path / "qnn/llm.mnn")
    assert keys == {"path", "inputs", "outputs", "allGraphName", "allInputShape"} and top == {"Input", "Plugin"}
    assert [op["name"] for op in plugins] == [f"qnn/graphllm{i}.bin" for i in range(29)]
    assert all(op["main"]["type"] == "QNN" for op in plugins)
    if REAL_STUB.is_file():  # the same attributes and op types as MNN master's own stub
        real_keys, real_top, _ = _plugin_layout(REAL_STUB)
        assert (keys, top) == (real_keys, real_top)
    _, _, visual = _plugin_layout(vl.path / "qnn/visual.mnn")
    assert [op["name"] for op in visual] == ["qnn/graphvisual0.bin"]


def test_sidecar_is_optional_and_the_stub_holds_the_io(tmp_path: Path) -> None:
    from harness.qnn.compiled_io import read_compiled_io

    info = make_qwen3_vl_export(tmp_path / "m", size_mb=0.5, sidecar=False, chunk_size=64,
                                image_sizes=["512x384", "448x448"])
    assert MANIFEST_PATH not in info.files
    io = read_compiled_io(info.path)
    # the stub's IO, re-read from the binaries by the host's QNN where it can (the same dims)
    assert io.source in ("stub", "libQnnSystem") and io.sidecar is None and not io.problems
    prefill = {i["name"]: i["shape"] for i in io.stubs["llm"].configs[0]["inputs"]}
    assert prefill == {"input_ids": [64, 1, 2048], "position_ids": [3, 64], "deepstack_embeds": [3, 64, 2048]}
    visual = io.stubs["visual"]
    assert [c["inputs"][0]["shape"] for c in visual.configs] == [[768, 1536], [784, 1536]]
    assert visual.outputs == ("image_embeds", "deepstack_feature")
    assert [g.name for g in visual.binaries[0].graphs] == ["graphvisual0", "graphvisual1_0"]


def test_edit_stub_and_set_compiled_dims(tmp_path: Path) -> None:
    from harness.qnn.compiled_io import read_stub

    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=3, sidecar=False)
    changed = []
    edit_stub(info.path / "qnn/llm.mnn",
              lambda g: changed.append(set_compiled_dims(g, "position_ids", [[3, 128], [3, 1]])))
    assert changed == [1]
    stub = read_stub(info.path / "qnn/llm.mnn", "qnn/llm.mnn")  # the stub alone: the binaries keep [1, N]
    assert [c["inputs"][1] for c in stub.configs] == [
        {"name": "position_ids", "shape": [3, 128]}, {"name": "position_ids", "shape": [3, 1]}]


def test_sdk_tool_stand_in(tmp_path: Path, vl) -> None:
    tool = write_sdk_tool(tmp_path / "sdk" / "bin" / "x86_64-linux-clang")
    out = tmp_path / "ctx.json"
    proc = subprocess.run([str(tool), "--context_binary", str(vl.path / "qnn/graphllm1.bin"), "--json_file", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = _load(out)
    assert (data["info"]["socModel"], data["info"]["contextMetadata"]["info"]["dspArch"]) == (69, 79)
    prefill = data["info"]["graphs"][0]["info"]
    assert prefill["graphName"] == "graphllm1"
    assert [t["info"]["dimensions"] for t in prefill["graphInputs"]] == [[1, 128, 2048], [3, 128, 2048]]
    assert context_binary_utility_json(vl.path / "qnn/graphllm1.bin") == data
    bad = subprocess.run([str(tool), "--context_binary", str(vl.path / "llm.mnn.weight"), "--json_file", str(out)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "Failed to get context binary info" in bad.stderr
