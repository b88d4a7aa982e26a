"""The visual graph: its outputs, and image sizes. `--image_sizes` is `WxH` (**width first**);
a prompt's `<hw>H, W</hw>` is **height first**. Both are compared on the resized patch grid the
graph was compiled for (docs/posdbg.md#image-grid-smart-resize). A QNN visual graph must output
both `image_embeds` and `deepstack_feature` (deepstack models)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from harness.checks.mrope import smart_resize
from harness.checks.shapes.compiled import ModelNeeds, fmt_shape, graph_inputs
from harness.checks.shapes.findings import WARNING, ShapeKind, shape_finding
from harness.errors import ArtifactError
from harness.export import SIDECAR_PATH
from harness.findings import Finding

_SIZE_RE = re.compile(r"\s*(\d+)\s*[xX]\s*(\d+)\s*")
_HW_RE = re.compile(r"<hw>(.*?)</hw>", re.S)
_IMG_RE = re.compile(r"<img>(.*?)</img>", re.S)


def parse_image_sizes(value: str | Sequence[Any]) -> list[tuple[int, int]]:
    """`--image_sizes` ("512x384,224x224": WIDTH x HEIGHT) -> [(w, h), ...]."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[tuple[int, int]] = []
    for item in items:
        if isinstance(item, str):
            if not item.strip():
                continue
            m = _SIZE_RE.fullmatch(item)
            if not m:
                raise ArtifactError(
                    f"image size {item!r} is not 'WxH' (width first, as --image_sizes takes it)"
                )
            out.append((int(m.group(1)), int(m.group(2))))
        else:
            w, h = item
            out.append((int(w), int(h)))
    return out


def parse_hw_tags(prompt: str) -> list[tuple[int, int] | None]:
    """One entry per `<img>` in a prompt: (height, width) from `<hw>H, W</hw>`, or None."""
    out: list[tuple[int, int] | None] = []
    for m in _IMG_RE.finditer(prompt):
        hw = _HW_RE.search(m.group(1))
        if not hw:
            out.append(None)
            continue
        parts = [p.strip() for p in hw.group(1).split(",")]
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ArtifactError(f"<hw>{hw.group(1)}</hw> must be '<hw>HEIGHT, WIDTH</hw>' (height first)")
        out.append((int(parts[0]), int(parts[1])))
    return out


def qwen3_grid(w: int, h: int) -> tuple[int, int]:
    """(grid_h, grid_w) in patches the way makeVLIOJson compiles a (w, h) size (align 32, patch 16)."""
    return (round(h / 32) * 32) // 16, (round(w / 32) * 32) // 16


def check_visual_io(model: ModelNeeds, configs: Sequence[dict[str, Any]], rel: str, source: str,
                     compiled_sizes: list[tuple[int, int]] | None) -> list[Finding]:
    findings: list[Finding] = []
    for n, cfg in enumerate(configs):
        outs = [str(o) for o in cfg.get("outputs", [])]
        needed = ["image_embeds"] + (["deepstack_feature"] if model.deepstack else [])
        for name in needed:
            if name not in outs:
                findings.append(shape_finding(
                    ShapeKind.VISUAL_OUTPUT_MISSING, rel, f"shape {n} outputs",
                    " + ".join(needed), ", ".join(outs) or "none",
                    "upstream makeVLIOJson keeps only image_embeds, so Qwen3-VL loses its deepstack "
                    "features on QNN; add deepstack_feature to the visual outputs and recompile, or "
                    "run the visual model on CPU (config_qnn_cpu_visual.json)"
                    if name == "deepstack_feature" else "the visual graph must output image_embeds",
                    source=source))
    if compiled_sizes is None:
        return findings
    if len(configs) != len(compiled_sizes) and compiled_sizes:
        findings.append(shape_finding(
            ShapeKind.IMAGE_SIZES_IO, rel, "compiled shapes", f"{len(compiled_sizes)} shape(s), one per "
            f"image size in {SIDECAR_PATH}", str(len(configs)),
            "the sidecar and the compiled visual graphs disagree; regenerate the sidecar", source=source))
    else:
        for n, ((w, h), cfg) in enumerate(zip(compiled_sizes, configs)):
            gh, gw = qwen3_grid(w, h)
            patches = graph_inputs(cfg).get("patches")
            if patches and patches[0] != gh * gw:
                findings.append(shape_finding(
                    ShapeKind.IMAGE_SIZES_IO, rel, f"shape {n} patches", f"[{gh * gw},...] for "
                    f"{w}x{h} (WxH, {SIDECAR_PATH})", fmt_shape(patches),
                    "image_sizes and the compiled visual graphs disagree; regenerate the sidecar",
                    source=source))
    return findings


def check_image_sizes(compiled: list[tuple[int, int]], rel: str,
                       image_sizes: str | Sequence[object] | None,
                       prompts: Sequence[str], source: str) -> list[Finding]:
    findings: list[Finding] = []
    grids = {qwen3_grid(w, h): (w, h) for w, h in compiled}
    shown = ",".join(f"{w}x{h}" for w, h in compiled) or "none"
    if image_sizes is not None:
        for w, h in parse_image_sizes(image_sizes):
            if qwen3_grid(w, h) not in grids:
                swapped = qwen3_grid(h, w) in grids
                findings.append(shape_finding(
                    ShapeKind.IMAGE_SIZE_MISMATCH, rel, "image_sizes", f"{w}x{h} (WxH) among compiled sizes",
                    shown, "the export was compiled for the transposed size: --image_sizes is "
                    "WIDTH x HEIGHT" if swapped else
                    f"re-run generate_llm_qnn.py --model_name visual.mnn --image_sizes {w}x{h}",
                    source=source))
    for p_idx, prompt in enumerate(prompts):
        for i_idx, hw in enumerate(parse_hw_tags(prompt)):
            key = f"prompt {p_idx} image {i_idx}"
            if hw is None:
                findings.append(shape_finding(
                    ShapeKind.IMAGE_SIZE_UNFORCED, rel, key, "<hw>H, W</hw> matching a compiled size",
                    "no <hw> tag", "the image is resized from its own size and the QNN plugin "
                    f"lookup fails unless it lands on a compiled size ({shown}); add "
                    "<hw>HEIGHT, WIDTH</hw>", severity=WARNING, source=source))
                continue
            height, width = hw
            try:
                rh, rw = smart_resize(height, width)
            except ValueError as exc:
                findings.append(shape_finding(ShapeKind.IMAGE_SIZE_MISMATCH, rel, key, "height, width >= 32",
                                             f"<hw>{height}, {width}</hw>", str(exc), source=source))
                continue
            grid = (rh // 16, rw // 16)
            if grid not in grids:
                swapped = (grid[1], grid[0]) in grids
                findings.append(shape_finding(
                    ShapeKind.IMAGE_SIZE_MISMATCH, rel, key,
                    f"a compiled size ({shown}, WxH)", f"<hw>{height}, {width}</hw> -> {rw}x{rh} (WxH)",
                    "<hw> is HEIGHT, WIDTH (height first) while --image_sizes is WIDTH x HEIGHT; "
                    f"write <hw>{width}, {height}</hw>" if swapped else
                    "use <hw>H, W</hw> matching a compiled size or recompile with --image_sizes WxH",
                    source=source))
    return findings


def check_patch_counts(configs: Sequence[dict[str, Any]], rel: str, image_sizes: str | Sequence[object] | None,
                        prompts: Sequence[str], source: str) -> list[Finding]:
    """Without the sidecar's image sizes the stub only tells each compiled shape's patch count:
    a requested size must land on one of them (its axis order cannot be told apart)."""
    counts = sorted({p[0] for p in (graph_inputs(c).get("patches") for c in configs) if p})
    if not counts:
        return []
    wanted: list[tuple[str, int, str]] = []
    if image_sizes is not None:
        for w, h in parse_image_sizes(image_sizes):
            gh, gw = qwen3_grid(w, h)
            wanted.append(("image_sizes", gh * gw, f"{w}x{h} (WxH)"))
    for p_idx, prompt in enumerate(prompts):
        for i_idx, hw in enumerate(parse_hw_tags(prompt)):
            if hw is None:
                continue
            try:
                rh, rw = smart_resize(*hw)
            except ValueError:
                continue
            wanted.append((f"prompt {p_idx} image {i_idx}", (rh // 16) * (rw // 16), f"<hw>{hw[0]}, {hw[1]}</hw>"))
    return [shape_finding(ShapeKind.IMAGE_SIZE_MISMATCH, rel, key, f"one of the compiled patch counts {counts}",
                         f"{what} -> {n} patches", "recompile the visual model with --image_sizes for this "
                         "size, or ask for a compiled size", source=source)
            for key, n, what in wanted if n not in counts]


__all__ = ["check_image_sizes", "check_patch_counts", "check_visual_io", "parse_hw_tags", "parse_image_sizes",
           "qwen3_grid"]
