"""The JSON files of an export: the runtime configs per backend pair, llm_config.json,
export_args.json (docs/mnn-export-layout.md), and the optional sidecar qnn/export_manifest.json.

The sidecar (knob sidecar=True) is written in the format docs/qnn-export-artifacts.md specifies
(its one home; harness.export reads it): soc_id/dsp_arch, chunk size, image sizes (WxH), the
makeIOJson IO and the graphs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.export import SIDECAR_FORMAT, SIDECAR_PATH
from harness.pairs import BackendPair
from virtual_lab.exports.spec import ExportSpec, llm_io, visual_io

# Which config the generator writes for each pair, keyed by the virtual lab's both-sides name.
VL_CONFIGS: dict[str, str] = {p.visual_llm: p.config_name for p in BackendPair.all(visual=True)}
TEXT_CONFIGS: dict[str, str] = {p.visual_llm: p.config_name for p in BackendPair.all(visual=False)}

MANIFEST_PATH = SIDECAR_PATH
MANIFEST_FORMAT = SIDECAR_FORMAT

# Real Qwen2/3-VL special token ids (HF tokenizer_config)
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 151652, 151653, 151655, 151656

_QWEN_TEMPLATE = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
    "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)


def base_config(spec: ExportSpec) -> dict:
    cfg: dict[str, Any] = {
        "llm_model": "llm.mnn", "llm_weight": "llm.mnn.weight",
        "backend_type": "cpu", "thread_num": 4, "precision": "low", "memory": "low",
        "sampler_type": spec.sampler_type, "temperature": 0.8, "top_k": 40, "top_p": 0.9,
        "min_p": 0.05, "tfs_z": 1.0, "typical": 0.95, "repetition_penalty": 1.0,
        "presence_penalty": 0.0, "frequency_penalty": 0.0, "penalty_window": 0, "n_gram": 8,
        "ngram_factor": 1.0,
        "tokenizer_file": "tokenizer.mtok" if spec.tokenizer == "mtok" else "tokenizer.txt",
    }
    if spec.is_visual:
        cfg["mllm"] = {"backend_type": "cpu", "thread_num": 4, "precision": "normal", "memory": "low"}
    return cfg


def llm_config(spec: ExportSpec) -> dict:
    cfg: dict[str, Any] = {
        "model_type": spec.model_type,
        "hidden_size": spec.hidden,
        "layer_nums": spec.layers,
        "attention_mask": "float",
        "attention_type": "full",
        "is_mrope": spec.is_visual,
        "max_position_embeddings": 262144 if spec.is_visual else 40960,
        "tie_embeddings": True,
        "jinja": {"chat_template": _QWEN_TEMPLATE, "eos": "<|im_end|>"},
    }
    if spec.is_visual:
        cfg.update({
            "mrope_axes": 3,
            "is_visual": True,
            "image_size": 420,
            "image_size_unit": 32,
            "image_min_pixels": 65536,
            "image_max_pixels": 16777216,
            "vision_start": VISION_START,
            "vision_end": VISION_END,
            "image_pad": IMAGE_PAD,
            "video_pad": VIDEO_PAD,
            "image_mean": [127.5, 127.5, 127.5],
            "image_norm": [1 / 127.5] * 3,
            "num_grid_per_side": 48,
            "has_deepstack": True,
        })
    return cfg


def export_args(spec: ExportSpec, dst: Path) -> dict:
    return {
        "path": spec.hf_name, "type": None, "tokenizer_path": spec.hf_name, "lora_path": None,
        "gptq_path": None, "dst_path": dst.name, "verbose": False, "test": None, "export": "mnn",
        "onnx_slim": False, "quant_bit": 4, "quant_block": 0, "visual_quant_bit": None,
        "visual_quant_block": None, "lm_quant_bit": 16, "lm_quant_block": 0,
        "mnnconvert": "../../../build/MNNConvert", "ppl": False, "awq": False, "hqq": False,
        "omni": False, "transformer_fuse": False, "transformer_c4": False,
        "group_conv_native": False, "smooth": True, "sym": True, "scale_bit": 16,
        "visual_sym": False, "seperate_embed": True, "lora_split": False, "calib_data": None,
        "act_bit": 16, "embed_bit": 16, "act_sym": True, "quant_config": None,
        "generate_for_npu": True, "skip_weight": False, "tie_word_embeddings": True,
    }


def manifest(spec: ExportSpec, dst: Path, llm_bins: list[str], vis_bins: list[str]) -> dict:
    base = ["python3", "generate_llm_qnn.py", "--model", dst.name, "--soc_id", str(spec.soc_id),
            "--dsp_arch", spec.dsp_arch, "--chunk_size", str(spec.chunk_size)]
    commands = [base + ["--model_name", "llm.mnn"]]
    io: dict[str, Any] = {"llm": llm_io(spec)}
    graphs: dict[str, Any] = {"llm": llm_bins}
    sizes = [f"{w}x{h}" for w, h in spec.image_sizes]
    if spec.is_visual:
        commands.append(base + ["--model_name", "visual.mnn", "--image_sizes", ",".join(sizes),
                                "--reuse_config_qnn_json", "True"])
        io["visual"] = visual_io(spec)
        graphs["visual"] = vis_bins
    return {
        "format": MANIFEST_FORMAT,
        "about": "harness sidecar: generate_llm_qnn.py keeps no record of its arguments or IO "
                 "json (tmp/input.json is deleted), so the export step writes this file",
        "model_type": spec.model_type,
        "soc_id": spec.soc_id,
        "dsp_arch": spec.dsp_arch,
        "vtcm_mb": spec.vtcm_mb,
        "chunk_size": spec.chunk_size,
        "max_history_token": 0,
        "image_sizes": sizes if spec.is_visual else [],
        "commands": commands,
        "io": io,
        "graphs": graphs,
    }
