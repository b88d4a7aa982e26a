"""The compiled IO read from the export's own artifacts: MNN master's real NPU stub
(../shared/models/smollm2-qnn-stub-v79), the virtual lab's stubs, the context binaries through
a qnn-context-binary-utility, the sidecar fallback, and the `python -m harness.checks.shapes` CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.checks.shapes import ERROR, WARNING, check_export_shapes, main
from harness.qnn import HOST_QNN_SWITCH, compiled_io
from harness.qnn.compiled_io import parse_stub, read_compiled_io
from harness.qnn.compiled_io import stub as stub_module
from virtual_lab.exports import make_qwen3_export, make_qwen3_vl_export, write_sdk_tool

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"
STUB = SHARED / "smollm2-qnn-stub-v79"
BASE = SHARED / "smollm2-135m-instruct-mnn-npu16"
SMALL = 0.5


def kinds(findings) -> set[str]:
    return {f.kind for f in findings}


@pytest.fixture
def smollm2(tmp_path: Path) -> Path:
    """The real stub overlaid on the SmolLM2 export it was made from (its README says so)."""
    if not (STUB / "qnn" / "llm.mnn").is_file() or not (BASE / "llm_config.json").is_file():
        pytest.skip(f"{STUB} or {BASE} is absent (../shared/models is not mounted)")
    dst = tmp_path / "smollm2"
    dst.mkdir()
    for p in BASE.iterdir():
        if p.is_file() and not p.name.startswith("."):
            (dst / p.name).symlink_to(p)
    shutil.copytree(STUB / "qnn", dst / "qnn")
    shutil.copy(STUB / "config_qnn.json", dst / "config_qnn.json")
    os.chmod(dst / "config_qnn.json", 0o644)
    return dst


def _set_limits(export: Path, limits: list[int]) -> None:
    cfg = json.loads((export / "config_qnn.json").read_text())
    cfg["chunk_limits"] = limits
    (export / "config_qnn.json").write_text(json.dumps(cfg))


# ---- the real stub ---------------------------------------------------------------------------


def test_real_stub_compiled_chunk_and_inputs(smollm2: Path) -> None:
    io = read_compiled_io(smollm2)
    stub = io.stubs["llm"]
    assert (io.source, stub.path, io.problems, stub.problems) == ("stub", "qnn/llm.mnn", (), ())
    assert len(stub.binaries) == 32 and stub.binaries[0].path == "qnn/graphllm0.bin"
    assert [g.name for g in stub.binaries[0].graphs] == ["graphllm0", "graphllm1_0"]
    assert stub.binaries[0].graphs[0].inputs == {"position_ids": (1, 128), "input_ids": (128, 1, 576)}
    assert stub.binaries[31].graphs[1].outputs == {"logits": (1, 1, 49152)}
    prefill, decode = ({i["name"]: i["shape"] for i in c["inputs"]} for c in stub.configs)
    assert prefill == {"input_ids": [128, 1, 576], "position_ids": [1, 128]}
    assert decode == {"input_ids": [1, 1, 576], "position_ids": [1, 1]}
    assert stub.declared["position_ids"] == (1, -1)
    # what the export cannot tell stays unknown
    assert (io.target.soc_id, io.target.dsp_arch, io.target.source) == (None, None, "unknown")


def test_real_stub_chunk_limits_agree(smollm2: Path) -> None:
    found = check_export_shapes(smollm2, "config_qnn.json")
    assert not {"chunk_mismatch", "chunk_limits", "chunk_size"} & kinds(found)
    assert kinds(found) == {"missing_binary"}  # step 3 (QNN compile) was not run


def test_real_stub_changed_chunk_limits_names_both_numbers(smollm2: Path) -> None:
    _set_limits(smollm2, [256, 1])
    (found,) = [f for f in check_export_shapes(smollm2, "config_qnn.json") if f.kind == "chunk_mismatch"]
    assert (found.where.file, found.where.key, found.severity, found.source) == ("config_qnn.json", "chunk_limits", ERROR, "stub")
    assert found.expected == "[128, 1]" and found.found == "[256, 1]"
    assert "compiled for chunk 128" in found.hint and "asks for 256" in found.hint
    _set_limits(smollm2, [128, 64, 1])  # 64 has no compiled graph
    (found,) = [f for f in check_export_shapes(smollm2, "config_qnn.json") if f.kind == "chunk_mismatch"]
    assert "[64]" in found.hint and "[1, 128]" in str(found.expected)


def test_real_stub_missing_binaries_are_named(smollm2: Path) -> None:
    (found,) = [f for f in check_export_shapes(smollm2, "config_qnn.json") if f.kind == "missing_binary"]
    assert str(found.found).startswith("32 missing: ")
    assert all(f"qnn/graphllm{n}.bin" in str(found.found).split(": ", 1)[1].split(", ") for n in range(32))
    for n in range(32):
        (smollm2 / "qnn" / f"graphllm{n}.bin").write_bytes(b"ctx")
    # none missing now; where the host's QNN reads binaries, it refuses these 3-byte ones (a warning each)
    assert {(f.kind, f.severity) for f in check_export_shapes(smollm2, "config_qnn.json")} <= {("io_unreadable", WARNING)}
    (smollm2 / "qnn" / "graphllm7.bin").unlink()
    (smollm2 / "qnn" / "graphllm32.bin").write_bytes(b"old")  # from an older compile
    by_kind = {f.kind.value: f for f in check_export_shapes(smollm2, "config_qnn.json")}
    assert by_kind["missing_binary"].found == "1 missing: qnn/graphllm7.bin"
    assert by_kind["leftover_binary"].found == "1 more: qnn/graphllm32.bin"


def test_real_stub_cli_json(smollm2: Path, capsys) -> None:
    _set_limits(smollm2, [256, 1])
    rc = main([str(smollm2), "--json", "--config", "config_qnn.json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert (out["source"], out["chunk_size"]) == ("stub", 128)
    assert out["inputs"]["llm"]["prefill"]["graph_inputs"] == {"input_ids": [128, 1, 576], "position_ids": [1, 128]}
    assert out["inputs"]["llm"]["decode"]["graph_inputs"]["position_ids"] == [1, 1]
    assert {f["kind"] for f in out["findings"]} == {"chunk_mismatch", "missing_binary"}
    assert all("kind" in f and "source" in f for f in out["findings"])


def test_cli_as_a_module_and_bad_input(tmp_path: Path) -> None:
    good = make_qwen3_export(tmp_path / "m", size_mb=SMALL, sidecar=False)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-m", "harness.checks.shapes", str(good.path)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"compiled IO from {read_compiled_io(good.path).source}, chunk size 128" in proc.stdout
    assert "llm prefill: input_ids [128,1,1024], position_ids [1,128]" in proc.stdout
    assert main([str(tmp_path / "nope")]) == 2


# ---- reading ---------------------------------------------------------------------------------


def test_stub_dump_is_cached_per_path_size_mtime(tmp_path: Path) -> None:
    info = make_qwen3_export(tmp_path / "m", size_mb=SMALL, sidecar=False)
    stub = info.path / "qnn/llm.mnn"
    compiled_io.read_stub(stub, "qnn/llm.mnn")
    before = stub_module._dump_cached.cache_info()
    compiled_io.read_stub(stub, "qnn/llm.mnn")
    after = stub_module._dump_cached.cache_info()
    assert (after.hits, after.misses) == (before.hits + 1, before.misses)
    os.utime(stub, ns=(stub.stat().st_atime_ns, stub.stat().st_mtime_ns + 10**9))  # "rewritten"
    compiled_io.read_stub(stub, "qnn/llm.mnn")
    assert stub_module._dump_cached.cache_info().misses == before.misses + 1


def test_ranks_that_cannot_be_told_are_a_problem_not_a_guess() -> None:
    graph = {"tensorName": ["a", "b", "c", "out"], "outputName": ["out"], "oplists": [
        {"type": "Plugin", "name": "qnn/graphllm0.bin", "inputIndexes": [0, 1], "outputIndexes": [3],
         "main": {"type": "QNN", "attr": [
             {"key": "path", "s": "qnn/graphllm0.bin"},
             {"key": "allGraphName", "list": {"s": ["graphllm0", "graphllm1_0"]}},
             {"key": "allInputShape", "list": {"i": [1, 128, 128, 1, 1, 1, 1, 1]}}]}}]}
    stub = parse_stub(graph, "qnn/llm.mnn")
    assert stub.binaries[0].graphs[0].inputs == {"a": None, "b": None}
    assert "cannot be told" in stub.problems[0]


def test_unreadable_stub_says_why(tmp_path: Path) -> None:
    info = make_qwen3_export(tmp_path / "m", size_mb=SMALL, sidecar=False)
    (info.path / "qnn/llm.mnn").write_bytes(b"not a model")
    io = read_compiled_io(info.path)
    assert "llm" not in io.stubs and "qnn/llm.mnn" in io.unread["llm"]
    found = check_export_shapes(info.path)
    assert [(f.kind, f.severity) for f in found] == [("io_unknown", WARNING)]


# ---- the context binaries through the SDK tool ----------------------------------------------


@pytest.fixture
def sdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The SDK tool is the source where the host has no QAIRT library of its own: these tests
    switch the host's off (the virtual lab's tool stand-in reads real binaries with it all the same)."""
    monkeypatch.setenv(HOST_QNN_SWITCH, "off")
    root = tmp_path / "qnn-sdk"
    write_sdk_tool(root / "bin" / "x86_64-linux-clang")
    return root


def test_sdk_reads_the_binaries_and_their_target(tmp_path: Path, sdk: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "m", size_mb=SMALL, sidecar=False, soc_id=57, dsp_arch="v75",
                                n_llm_graphs=4)
    io = read_compiled_io(info.path, qnn_sdk=sdk)
    assert io.source == "qnn-context-binary-utility" and io.problems == ()
    assert (io.target.soc_id, io.target.dsp_arch, io.target.source) == (57, "v75", "qnn-context-binary-utility")
    prefill = {i["name"]: i["shape"] for i in io.stubs["llm"].configs[0]["inputs"]}
    assert prefill["deepstack_embeds"] == [3, 128, 2048] and prefill["position_ids"] == [3, 128]
    found = check_export_shapes(info.path, "config_qnn.json", soc_id=69, dsp_arch="v79", qnn_sdk=sdk)
    assert {(f.kind, f.where.key, f.source) for f in found} == {
        ("target_mismatch", "soc_id", "qnn-context-binary-utility"),
        ("target_mismatch", "dsp_arch", "qnn-context-binary-utility")}
    # without the SDK or a sidecar the target is unknown: said, never guessed
    found = check_export_shapes(info.path, "config_qnn.json", soc_id=69, dsp_arch="v79")
    assert [(f.kind, f.severity, f.found) for f in found] == [("target_unknown", WARNING, "unknown")]
    assert "--qnn-sdk" in found[0].hint


def test_sdk_finds_a_placeholder_the_binaries_were_compiled_with(tmp_path: Path, sdk: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "m", size_mb=SMALL, sidecar=False, deepstack_placeholder=True,
                                n_llm_graphs=4)
    found = [f for f in check_export_shapes(info.path, "config_qnn.json", qnn_sdk=sdk)
             if f.kind == "deepstack_placeholder"]
    assert [f.source for f in found] == ["qnn-context-binary-utility"] * 2


def test_sdk_without_the_tool_or_failing(tmp_path: Path, sdk: Path) -> None:
    info = make_qwen3_export(tmp_path / "m", size_mb=SMALL, n_llm_graphs=4)
    io = read_compiled_io(info.path, qnn_sdk=tmp_path / "empty-sdk")
    assert io.source == "stub" and "qnn-context-binary-utility" in io.problems[0]
    assert io.target.source == "sidecar"  # the sidecar is the fallback for the target
    (info.path / "qnn/graphllm3.bin").write_bytes(b"garbage")
    io = read_compiled_io(info.path, qnn_sdk=sdk)
    assert io.source == "stub"  # one binary unread: the stub's view stays the IO
    assert any("graphllm3.bin" in p and "could not read it" in p for p in io.problems)


def test_visual_sizes_without_sidecar_check_patch_counts(tmp_path: Path) -> None:
    info = make_qwen3_vl_export(tmp_path / "m", size_mb=SMALL, sidecar=False, n_llm_graphs=4,
                                image_sizes=["512x384"])
    assert check_export_shapes(info.path, "config_qnn.json", image_sizes="512x384",
                               prompts=["<img><hw>384, 512</hw>a.jpg</img>x"]) == []
    found = check_export_shapes(info.path, "config_qnn.json", image_sizes="448x448",
                                prompts=["<img><hw>224, 224</hw>a.jpg</img>x"])
    source = read_compiled_io(info.path).source  # the stub, re-read by the host's QNN where it has one
    assert [(f.kind, f.where.key, f.source) for f in found] == [
        ("image_size_mismatch", "image_sizes", source), ("image_size_mismatch", "prompt 0 image 0", source)]
    assert "[768]" in str(found[0].expected) and "784 patches" in str(found[0].found)
    # the stub cannot tell 384x512 from 512x384 (same patch count): only the sidecar can
    assert check_export_shapes(info.path, "config_qnn.json", image_sizes="384x512") == []


def test_context_dump_in_the_sdk_tools_layout() -> None:
    """The layout public users of `qnn-context-binary-utility --json_file` read (see
    docs/qnn-export-artifacts.md): socModel under info, dspArch under
    info.contextMetadata.info, graphs with graphBlobInfo beside their tensors."""
    dump = {"info": {
        "backendId": 6, "buildId": "v2.34.0.250424", "socModel": 69, "numGraphs": 1,
        "contextMetadata": {"info": {"dspArch": 79}},
        "graphs": [{"info": {
            "graphName": "graph0",
            "graphInputs": [{"info": {"name": "t0", "dimensions": [1, 128], "dataType": "QNN_DATATYPE_INT_32"}}],
            "graphOutputs": [{"info": {"name": "t9", "dimensions": [1, 128, 151936]}}],
            "graphBlobInfo": {"info": {"vtcmSize": 8, "optimizationLevel": 3}},
        }}]}}
    binary = compiled_io.parse_context_dump(dump, "qnn/graph0.bin", None)
    assert (binary.soc_id, binary.dsp_arch) == (69, "v79")
    assert binary.graphs[0].name == "graph0" and binary.graphs[0].inputs == {"t0": (1, 128)}
    # No target keys at all: unknown, never guessed.
    del dump["info"]["socModel"], dump["info"]["contextMetadata"]
    assert (compiled_io.parse_context_dump(dump, "b", None).soc_id,
            compiled_io.parse_context_dump(dump, "b", None).dsp_arch) == (None, None)
