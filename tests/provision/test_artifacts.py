"""Export validation: complete folders pass, every gap is named, the target is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ArtifactError
from harness.provision import check_target, load_export
from tests.provision.conftest import local_device, shared_models_dir
from tests.ptekit import fake_program
from tests.qnn.material import vlab_real_binaries_or_skip
from virtual_lab.exports import make_executorch_export, make_qwen3_export

pytestmark = pytest.mark.slow  # tens of seconds: tests/conftest.py starts slow files early


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    path.write_text(json.dumps(data))


def test_text_export_loads_with_type_configs_and_target(qwen3_export: Path):
    art = load_export(qwen3_export)
    assert art.kind == "mnn"
    assert art.model_type == "qwen3"
    assert art.configs == {"qnn": "config_qnn.json", "cpu": "config.json"}
    assert art.uses_qnn and not art.is_visual
    assert art.target is not None
    assert (art.target.soc_id, art.target.htp_arch, art.target.chunk_size) == (69, "v79", 128)
    rels = {f.rel for f in art.files}
    assert {"qnn/graphllm0.bin", "qnn/graphllm3.bin", "llm.mnn.weight", "virtual_behaviour.json"} <= rels
    assert art.total_bytes == sum(f.path.stat().st_size for f in art.files)


def test_vl_export_has_the_four_backend_pairs(qwen3_vl_export: Path):
    art = load_export(qwen3_vl_export)
    assert art.model_type == "qwen3_vl" and art.is_visual
    assert set(art.configs) == {"qnn/qnn", "qnn/cpu", "cpu/qnn", "cpu/cpu"}


def test_model_type_comes_from_llm_config_not_the_folder_name(qwen3_export: Path, tmp_path: Path):
    renamed = qwen3_export.rename(tmp_path / "Qwen2.5-VL-7B-definitely")
    assert load_export(renamed).model_type == "qwen3"
    _edit_json(renamed / "llm_config.json", model_type=None)
    with pytest.raises(ArtifactError, match=r"llm_config\.json: key 'model_type' is missing"):
        load_export(renamed)


@pytest.mark.parametrize("missing, named", [
    ("llm.mnn.weight", "llm_weight -> llm.mnn.weight"),
    ("qnn/llm.mnn", "llm_model -> qnn/llm.mnn"),
    ("tokenizer.mtok", "tokenizer_file -> tokenizer.mtok"),
    ("embeddings_bf16.bin", "embedding_file -> embeddings_bf16.bin"),
])
def test_missing_required_file_is_named_with_its_config(qwen3_export: Path, missing: str, named: str):
    (qwen3_export / missing).unlink()
    with pytest.raises(ArtifactError) as err:
        load_export(qwen3_export)
    assert named in str(err.value) and "config" in str(err.value)


def test_gap_in_context_binaries_is_named(qwen3_export: Path):
    (qwen3_export / "qnn/graphllm2.bin").unlink()
    with pytest.raises(ArtifactError, match=r"missing graphllm2\.bin"):
        load_export(qwen3_export)


def test_no_context_binaries_at_all(qwen3_export: Path):
    for p in (qwen3_export / "qnn").glob("graphllm*.bin"):
        p.unlink()
    with pytest.raises(ArtifactError, match=r"no graphllm<N>\.bin context binaries"):
        load_export(qwen3_export)


def test_truncated_context_binary(qwen3_export: Path):
    (qwen3_export / "qnn/graphllm1.bin").write_bytes(b"")
    with pytest.raises(ArtifactError, match=r"graphllm1\.bin is empty"):
        load_export(qwen3_export)


def test_wrapper_reference_to_absent_binary(qwen3_export: Path):
    # The plugin wrapper names its context binaries: a last one missing leaves no gap to see.
    wrapper = qwen3_export / "qnn/llm.mnn"
    wrapper.write_bytes(wrapper.read_bytes() + b"\x00qnn/graphllm4.bin\x00")
    with pytest.raises(ArtifactError, match=r"refers to graphllm4\.bin"):
        load_export(qwen3_export)


def test_visual_binaries_checked_for_qnn_visual(qwen3_vl_export: Path):
    (qwen3_vl_export / "qnn/graphvisual0.bin").unlink()
    with pytest.raises(ArtifactError, match=r"graphvisual<N>\.bin"):
        load_export(qwen3_vl_export)


def test_bad_json_names_file_and_position(qwen3_export: Path):
    (qwen3_export / "config_qnn.json").write_text('{"llm_model": "qnn/llm.mnn",,}')
    with pytest.raises(ArtifactError, match=r"config_qnn\.json: config_qnn\.json is not valid JSON \(line 1"):
        load_export(qwen3_export)


def test_config_pointing_outside_the_export(qwen3_export: Path):
    _edit_json(qwen3_export / "config.json", llm_weight="../elsewhere/llm.mnn.weight")
    with pytest.raises(ArtifactError, match=r"points outside the export folder"):
        load_export(qwen3_export)


def test_not_an_export(tmp_path: Path):
    (tmp_path / "readme.txt").write_text("hi")
    with pytest.raises(ArtifactError, match="neither an MNN export"):
        load_export(tmp_path)
    with pytest.raises(ArtifactError, match="not a folder"):
        load_export(tmp_path / "nope")


def test_arch_mismatch_refused(tmp_path: Path):
    from virtual_lab.exports import make_qwen3_export

    make_qwen3_export(tmp_path / "m", size_mb=1, n_llm_graphs=2, soc_id=69, dsp_arch="v79")
    art = load_export(tmp_path / "m")
    v75 = local_device(tmp_path, soc_model="SM8650", soc_id=57, htp_arch="v75", name="sm8650")
    with pytest.raises(ArtifactError) as err:
        check_target(art, v75)
    msg = str(err.value)
    assert "HTP v79" in msg and "sm8650" in msg and "--dsp_arch v75" in msg
    check_target(art, local_device(tmp_path))  # the v79 device is fine


def test_soc_mismatch_within_arch_refused(tmp_path: Path):
    from virtual_lab.exports import make_qwen3_export

    make_qwen3_export(tmp_path / "m", size_mb=1, n_llm_graphs=2, soc_id=75, dsp_arch="v79")  # SXR2330P
    with pytest.raises(ArtifactError, match=r"--soc_id 69"):
        check_target(load_export(tmp_path / "m"), local_device(tmp_path))


def test_target_from_export_args_when_no_sidecar(tmp_path: Path):
    # stand-in binaries: where QNN reads real ones, their socModel is the target (test_preflight)
    qwen3_export = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=2, qnn_binaries="stand-in").path
    (qwen3_export / "qnn/export_manifest.json").unlink()
    _edit_json(qwen3_export / "export_args.json", soc_id=57, dsp_arch="v75")
    art = load_export(qwen3_export)
    assert art.target is not None
    assert (art.target.soc_id, art.target.htp_arch) == (57, "v75")
    with pytest.raises(ArtifactError, match="HTP v75"):
        check_target(art, local_device(tmp_path))


def test_contradicting_target_records(qwen3_export: Path):
    _edit_json(qwen3_export / "export_args.json", soc_id=57, dsp_arch="v75")
    with pytest.raises(ArtifactError, match="disagrees with itself"):
        load_export(qwen3_export)


def test_soc_id_contradicting_arch(qwen3_export: Path):
    _edit_json(qwen3_export / "qnn/export_manifest.json", soc_id=57, dsp_arch="v79")
    with pytest.raises(ArtifactError, match=r"soc_id 57 is SM8650 \(HTP v75\) but dsp_arch says v79"):
        load_export(qwen3_export)


def test_unknown_target_is_refused_unless_allowed(tmp_path: Path):
    qwen3_export = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=2, qnn_binaries="stand-in").path
    (qwen3_export / "qnn/export_manifest.json").unlink()
    _edit_json(qwen3_export / "export_args.json", soc_id=None, dsp_arch=None)
    art = load_export(qwen3_export)
    with pytest.raises(ArtifactError, match="without a recorded target"):
        check_target(art, local_device(tmp_path))
    check_target(art, local_device(tmp_path), allow_unknown_target=True)


def test_executorch_export_without_a_tokenizer(tmp_path: Path):
    (tmp_path / "kv_llama_qnn.pte").write_bytes(fake_program(b"QnnBackend" + bytes(100)))
    with pytest.raises(ArtifactError, match="without a tokenizer"):
        load_export(tmp_path)


@pytest.mark.real_qnn
def test_executorch_export(tmp_path: Path):
    vlab_real_binaries_or_skip()
    make_executorch_export(tmp_path, soc_id=69, program="real")  # the virtual lab's SM8750 program
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / "tokenizer.bin").write_bytes(b"tok")
    (tmp_path / "export_manifest.json").write_text(json.dumps(
        {"decoder_model_version": "qwen3", "soc_model": "SM8750"}))
    art = load_export(tmp_path)
    assert (art.kind, art.model_type, art.configs) == ("executorch", "qwen3", {"qnn": "kv_llama_qnn.pte"})
    assert art.target is not None
    assert (art.target.soc_id, art.target.htp_arch) == (69, "v79")
    assert art.target.qairt_build and "kv_llama_qnn.pte#forward[0]" in art.target.source  # read from the program
    with pytest.raises(ArtifactError, match="HTP v79"):
        check_target(art, local_device(tmp_path, soc_model="SM8650", soc_id=57, htp_arch="v75"))


def test_real_shared_smollm2_export_loads():
    root = shared_models_dir() / "smollm2-135m-instruct-mnn-npu16"
    if not root.is_dir():
        pytest.skip(f"{root} is absent (the shared models folder is not mounted)")
    art = load_export(root)
    assert art.model_type == "llama"  # from llm_config.json; the folder says "smollm2"
    assert art.configs == {"cpu": "config.json"} and not art.uses_qnn
    assert {"llm.mnn.weight", "tokenizer.mtok", "embeddings_bf16.bin"} <= {f.rel for f in art.files}


# ---- every named file holds data; one symlink rule --------------------------------------------
@pytest.mark.parametrize("name, named", [
    ("llm.mnn.weight", "llm_weight -> llm.mnn.weight"),
    ("tokenizer.mtok", "tokenizer_file -> tokenizer.mtok"),
    ("embeddings_bf16.bin", "embedding_file -> embeddings_bf16.bin"),
    ("qnn/llm.mnn", "llm_model -> qnn/llm.mnn"),
])
def test_empty_file_named_by_a_config_is_refused(qwen3_export: Path, name: str, named: str):
    (qwen3_export / name).write_bytes(b"")
    with pytest.raises(ArtifactError, match=r"config.*\.json: names empty file") as err:
        load_export(qwen3_export)
    assert named in str(err.value) and "truncated" in str(err.value)


def test_empty_pte_or_tokenizer_is_refused(tmp_path: Path):
    root = tmp_path / "et"
    root.mkdir()
    (root / "model.pte").write_bytes(b"")
    (root / "tokenizer.bin").write_bytes(b"tok")
    with pytest.raises(ArtifactError, match=r"names empty file.*model\.pte"):
        load_export(root)
    (root / "model.pte").write_bytes(b"program")
    (root / "tokenizer.bin").write_bytes(b"")
    with pytest.raises(ArtifactError, match=r"names empty file.*tokenizer\.bin"):
        load_export(root)


def test_symlinked_file_leaving_the_export_is_refused_unless_asked(qwen3_export: Path, tmp_path: Path):
    outside = tmp_path / "elsewhere" / "secret.bin"
    outside.parent.mkdir()
    outside.write_bytes(b"host file")
    (qwen3_export / "notes.bin").symlink_to(outside)  # a file no config names: still refused
    with pytest.raises(ArtifactError, match=r"notes\.bin: symlink to .*secret\.bin, outside the export"):
        load_export(qwen3_export)
    art = load_export(qwen3_export, follow_external_links=True)
    assert any(f.rel == "notes.bin" and f.size == len(b"host file") for f in art.files)


def test_config_key_and_listed_file_follow_the_same_rule(qwen3_export: Path, tmp_path: Path):
    weight = qwen3_export / "llm.mnn.weight"
    moved = tmp_path / "outside.weight"
    weight.rename(moved)
    weight.symlink_to(moved)  # the config names it; the link leaves the export
    with pytest.raises(ArtifactError, match=r"llm\.mnn\.weight: symlink to .*outside\.weight, outside the export"):
        load_export(qwen3_export)
    # A config key naming the outside file by path is refused just the same.
    weight.unlink()
    weight.write_bytes(moved.read_bytes())
    _edit_json(qwen3_export / "config.json", llm_weight=str(moved))
    with pytest.raises(ArtifactError, match=r"points outside the export folder"):
        load_export(qwen3_export)


def test_links_inside_the_export_are_followed(qwen3_export: Path):
    (qwen3_export / "copies").mkdir()
    (qwen3_export / "copies" / "tok").symlink_to("../tokenizer.mtok")
    (qwen3_export / "qnn-link").symlink_to("qnn", target_is_directory=True)
    rels = {f.rel for f in load_export(qwen3_export).files}
    assert {"copies/tok", "qnn-link/graphllm0.bin"} <= rels


def test_folder_link_leaving_the_export_or_looping_is_refused(qwen3_export: Path, tmp_path: Path):
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "x.bin").write_bytes(b"x")
    (qwen3_export / "ext").symlink_to(tmp_path / "ext", target_is_directory=True)
    with pytest.raises(ArtifactError, match=r"ext: symlink to .*outside the export"):
        load_export(qwen3_export)
    (qwen3_export / "ext").unlink()
    (qwen3_export / "qnn" / "up").symlink_to("..", target_is_directory=True)
    with pytest.raises(ArtifactError, match=r"up: folder symlink to its own ancestor"):
        load_export(qwen3_export)


def test_a_pte_one_folder_down_is_a_clear_error(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "model.pte").write_bytes(fake_program())
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ArtifactError, match=r"no \.pte at the top of the folder, only in a subfolder \(sub/model\.pte\)"):
        load_export(tmp_path)


@pytest.mark.parametrize("data, words", [
    (b"\x8f\x13random bytes, not a program" * 40, r"not an ExecuTorch program \(no 'ET12' identifier at byte 4"),
    (fake_program()[:4] + b"ET12eh00" + bytes(40), r"truncated or corrupt: its header says"),
])
def test_a_random_or_cut_program_is_refused_on_load(tmp_path: Path, data: bytes, words: str):
    (tmp_path / "model.pte").write_bytes(data)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ArtifactError, match=rf"model\.pte: {words}"):
        load_export(tmp_path)


def test_a_name_that_is_not_utf8_is_refused_and_special_files_are_named(tmp_path: Path, caplog):
    import os
    import socket

    from harness.provision import list_files

    (tmp_path / "model.pte").write_bytes(b"x")
    os.mkfifo(tmp_path / "pipe")  # opening it would block the push forever
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        assert [f.rel for f in list_files(tmp_path)] == ["model.pte"]
    assert "pipe is a FIFO" in caplog.text and "sock is a socket" in caplog.text and "left out" in caplog.text
    (tmp_path.joinpath(os.fsdecode(b"caf\xe9.bin"))).write_bytes(b"x")  # Latin-1, not UTF-8
    with pytest.raises(ArtifactError, match=r"caf\\xe9.bin'?: the file name is not UTF-8; rename it"):
        list_files(tmp_path)
