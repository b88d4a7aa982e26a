"""What one generated export is (`ExportSpec`, from the make_*_export knobs) and the makeIOJson
IO configs its QNN graphs were compiled for (the shapes the stubs, binaries and sidecar share)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from virtual_lab.exports.behaviour import SCENARIOS

DEEPSTACK_LAYERS = 3  # Qwen3-VL deepstack_visual_indexes [5, 11, 17]


@dataclass
class ExportSpec:
    """Everything that differs between the text and the VL export."""

    model_type: str
    hf_name: str
    hidden: int
    layers: int
    vocab: int
    is_visual: bool
    size_mb: float
    soc_id: int
    dsp_arch: str
    vtcm_mb: int
    chunk_size: int
    chunk_limits: list[int]
    image_sizes: tuple[tuple[int, int], ...]
    deepstack_placeholder: bool
    visual_outputs: tuple[str, ...]
    tokenizer: str
    n_llm_graphs: int
    n_visual_graphs: int
    sampler_type: str
    seed: int
    sidecar: bool = True
    scenario: str = "healthy"  # one of SCENARIOS
    qnn_binaries: str = "auto"  # "auto" | "real" | "stand-in" (virtual_lab.exports.binaries)
    extra: dict = field(default_factory=dict)


def parse_sizes(sizes: Iterable[Any]) -> tuple[tuple[int, int], ...]:
    """(width, height) pairs from "WxH" strings or pairs, in --image_sizes order."""
    out = []
    for s in sizes:
        if isinstance(s, str):
            m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", s)
            if not m:
                raise ValueError(f"image size {s!r} must be 'WxH' (width first), e.g. '512x384'")
            out.append((int(m.group(1)), int(m.group(2))))
        else:
            w, h = s
            out.append((int(w), int(h)))
    if any(w <= 0 or h <= 0 for w, h in out):
        raise ValueError(f"image sizes must be positive, got {out}")
    return tuple(out)


def llm_io(spec: ExportSpec) -> dict:
    """makeIOJson's format; VL models get [3,seq] positions and a real deepstack input."""
    mask_type = "float"
    configs = []
    for seq, logits_index in ((spec.chunk_size, 0), (1, -1)):
        inputs: list[dict] = [
            {"name": "input_ids", "shape": [seq, 1, spec.hidden]},
            {"name": "attention_mask", "shape": [1, 1, seq, seq], "type": mask_type},
            {"name": "position_ids", "shape": [3 if spec.is_visual else 1, seq], "type": "int"},
            {"name": "logits_index", "shape": [1], "type": "int", "value": logits_index},
        ]
        if spec.is_visual:
            shape = [3, 1, 1] if spec.deepstack_placeholder else [DEEPSTACK_LAYERS, seq, spec.hidden]
            inputs.append({"name": "deepstack_embeds", "shape": shape})
        configs.append({"inputs": inputs, "outputs": ["logits"]})
    return {"configs": configs}


def visual_io(spec: ExportSpec) -> dict:
    """makeVLIOJson's Qwen3-VL branch (align 32, patch 16), one config per (w, h)."""
    configs = []
    for w, h in spec.image_sizes:
        grid_h = (round(h / 32) * 32) // 16
        grid_w = (round(w / 32) * 32) // 16
        seq = grid_h * grid_w
        configs.append({
            "inputs": [
                {"name": "patches", "shape": [seq, 1536]},
                {"name": "position_ids", "shape": [2, seq]},
                {"name": "attention_mask", "shape": [1, seq, seq]},
                {"name": "idx_tensor", "shape": [4, seq]},
                {"name": "weight_tensor", "shape": [4, seq]},
            ],
            "outputs": list(spec.visual_outputs),
        })
    return {"configs": configs}


def common_knobs(kw: dict, *, default_mb: float) -> dict:
    """Pop the knobs both models share from `kw`, checked, as ExportSpec fields."""
    chunk_size = int(kw.pop("chunk_size", 128))
    limits = kw.pop("chunk_limits", None)
    limits = [chunk_size, 1] if limits is None else [int(x) for x in limits]
    arch = str(kw.pop("dsp_arch", "v79"))
    if not arch.startswith("v"):
        arch = "v" + arch
    tokenizer = kw.pop("tokenizer", "mtok")
    if tokenizer not in ("mtok", "txt"):
        raise ValueError(f"tokenizer must be 'mtok' or 'txt', got {tokenizer!r}")
    scenario = str(kw.pop("scenario", "healthy"))
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
    qnn_binaries = str(kw.pop("qnn_binaries", "auto"))
    if qnn_binaries not in ("auto", "real", "stand-in"):
        raise ValueError(f"qnn_binaries must be 'auto', 'real' or 'stand-in', got {qnn_binaries!r}")
    size_mb = float(kw.pop("size_mb", default_mb))
    if size_mb <= 0:
        raise ValueError(f"size_mb must be positive, got {size_mb}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return dict(
        size_mb=size_mb, soc_id=int(kw.pop("soc_id", 69)), dsp_arch=arch,
        vtcm_mb=int(kw.pop("vtcm_mb", 8)), chunk_size=chunk_size, chunk_limits=limits,
        tokenizer=tokenizer, sampler_type=str(kw.pop("sampler_type", "mixed")),
        seed=int(kw.pop("seed", 0)), sidecar=bool(kw.pop("sidecar", True)), scenario=scenario,
        qnn_binaries=qnn_binaries,
    )
