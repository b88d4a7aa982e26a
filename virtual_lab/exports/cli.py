"""`python -m virtual_lab.exports {qwen3,qwen3-vl} DST [--size-mb N] [--soc-id 69 --dsp-arch v79]
[--no-sidecar] ...`: write a realistic MNN export folder and print a JSON summary."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from virtual_lab.exports.behaviour import SCENARIOS
from virtual_lab.exports.writer import make_qwen3_export, make_qwen3_vl_export


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m virtual_lab.exports",
                                     description="Write a realistic MNN export folder.")
    parser.add_argument("model", choices=("qwen3", "qwen3-vl"))
    parser.add_argument("dst", type=Path)
    parser.add_argument("--size-mb", type=float, default=None)
    parser.add_argument("--soc-id", type=int, default=69)
    parser.add_argument("--dsp-arch", default="v79")
    parser.add_argument("--chunk-size", type=int, default=128)
    parser.add_argument("--chunk-limits", default=None, help="comma list, e.g. 256,1")
    parser.add_argument("--image-sizes", default="512x512", help="WxH[,WxH...], width first")
    parser.add_argument("--deepstack-placeholder", action="store_true")
    parser.add_argument("--no-deepstack-feature", action="store_true")
    parser.add_argument("--missing", action="append", default=[])
    parser.add_argument("--tokenizer", choices=("mtok", "txt"), default="mtok")
    parser.add_argument("--no-sidecar", action="store_true", help="no qnn/export_manifest.json, like a real export")
    parser.add_argument("--scenario", choices=SCENARIOS, default="healthy")
    args = parser.parse_args(argv)
    knobs: dict[str, Any] = dict(soc_id=args.soc_id, dsp_arch=args.dsp_arch,
                                 chunk_size=args.chunk_size, missing=args.missing,
                                 tokenizer=args.tokenizer, sidecar=not args.no_sidecar, scenario=args.scenario)
    if args.size_mb is not None:
        knobs["size_mb"] = args.size_mb
    if args.chunk_limits:
        knobs["chunk_limits"] = [int(x) for x in args.chunk_limits.split(",")]
    try:
        if args.model == "qwen3":
            info = make_qwen3_export(args.dst, **knobs)
        else:
            knobs["image_sizes"] = [s for s in args.image_sizes.split(",") if s.strip()]
            knobs["deepstack_placeholder"] = args.deepstack_placeholder
            if args.no_deepstack_feature:
                knobs["visual_outputs"] = ("image_embeds",)
            info = make_qwen3_vl_export(args.dst, **knobs)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"path": str(info.path), "model_type": info.model_type,
                      "configs": info.configs, "files": len(info.files),
                      "total_bytes": info.total_bytes}, indent=2))
    return 0
