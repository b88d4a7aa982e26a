"""harness.export: the one reader of an export folder's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ArtifactError
from harness.export import SIDECAR_PATH, ExportFileError, FileProblem, open_export


def _write(root: Path, rel: str, data: object) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(data if isinstance(data, str) else json.dumps(data))


def test_pairs_come_from_config_content(tmp_path: Path) -> None:
    _write(tmp_path, "llm_config.json", {"model_type": " qwen3_vl ", "is_visual": True})
    _write(tmp_path, "config.json", {})
    _write(tmp_path, "config_qnn.json", {"llm_model": "qnn/llm.mnn", "visual_model": "qnn/visual.mnn"})
    # A config the exporter would not name so still counts, by what it runs.
    _write(tmp_path, "config_mine.json", {"visual_model": "qnn/visual.mnn"})
    export = open_export(tmp_path)
    assert export.model_type == "qwen3_vl" and export.is_visual
    assert export.config_names == ("config.json", "config_mine.json", "config_qnn.json")
    assert export.pairs == {"qnn/qnn": "config_qnn.json", "qnn/cpu": "config_mine.json", "cpu/cpu": "config.json"}


def test_same_pair_twice_prefers_the_exporters_name(tmp_path: Path) -> None:
    _write(tmp_path, "llm_config.json", {"model_type": "qwen3"})
    _write(tmp_path, "config_a.json", {})
    _write(tmp_path, "config.json", {})
    _write(tmp_path, "config_qnn.json", {"llm_model": "llm.mnn"})  # named QNN, runs on CPU
    assert open_export(tmp_path).pairs == {"cpu": "config.json"}


def test_unusable_records_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="not a folder"):
        open_export(tmp_path / "nope")
    export = open_export(tmp_path)
    with pytest.raises(ExportFileError) as info:
        _ = export.llm_config
    assert info.value.problem is FileProblem.MISSING and "llm_config.json is missing" in str(info.value)
    _write(tmp_path, "llm_config.json", {"model_type": ""})
    with pytest.raises(ArtifactError, match="'model_type' is missing or empty"):
        _ = open_export(tmp_path).model_type
    _write(tmp_path, "config.json", "{not json")
    with pytest.raises(ExportFileError) as info:
        open_export(tmp_path).config("config.json")
    assert info.value.problem is FileProblem.INVALID and "config.json is not valid JSON" in str(info.value)
    _write(tmp_path, SIDECAR_PATH, [1])
    with pytest.raises(ExportFileError) as info:
        _ = open_export(tmp_path).sidecar
    assert info.value.problem is FileProblem.NOT_OBJECT and info.value.path == tmp_path / SIDECAR_PATH


def test_sidecar_in_qnn_first(tmp_path: Path) -> None:
    assert open_export(tmp_path).sidecar is None
    _write(tmp_path, "export_manifest.json", {"soc_id": 57})
    _write(tmp_path, SIDECAR_PATH, {"soc_id": 69})
    export = open_export(tmp_path)
    assert [s.rel for s in export.sidecars] == [SIDECAR_PATH, "export_manifest.json"]
    assert export.sidecar is not None and export.sidecar.data == {"soc_id": 69}


def test_program_model_type_from_sidecar_then_llm_config(tmp_path: Path) -> None:
    assert open_export(tmp_path).program_model_type == ""
    _write(tmp_path, "llm_config.json", {"model_type": "qwen3"})
    assert open_export(tmp_path).program_model_type == "qwen3"
    _write(tmp_path, "export_manifest.json", {"decoder_model_version": "qwen3-0_6b"})
    assert open_export(tmp_path).program_model_type == "qwen3-0_6b"


def test_system_prompt_from_the_key_else_the_templates_literal_system_turn(tmp_path):
    import json

    from harness.export import ExportFolder, default_system_turn

    chatml = ("{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are "
              "a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}")
    assert default_system_turn(chatml) == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    # Built from variables (Qwen3's template): no literal text to take.
    assert default_system_turn("{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}") == ""
    llama3 = "{{ '<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>' }}"
    assert default_system_turn(llama3) == "Be brief."

    root = tmp_path / "e"
    root.mkdir()
    (root / "llm_config.json").write_text(json.dumps({"model_type": "llama", "jinja": {"chat_template": chatml}}))
    assert ExportFolder(root).system_prompt.startswith("You are a helpful AI assistant named SmolLM")
    (root / "config.json").write_text(json.dumps({"llm_model": "llm.mnn", "system_prompt": "Answer in French."}))
    assert ExportFolder(root).system_prompt == "Answer in French."
    (root / "llm_config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (root / "config.json").write_text(json.dumps({"llm_model": "llm.mnn"}))
    assert ExportFolder(root).system_prompt == ""


def test_the_real_smollm2_exports_system_prompt():
    from pathlib import Path

    from harness.export import ExportFolder

    real = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "smollm2-135m-instruct-mnn-npu16"
    if not (real / "llm_config.json").is_file():
        pytest.skip(f"the real SmolLM2 export is absent ({real}); it comes with ../shared")
    assert ExportFolder(real).system_prompt == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
