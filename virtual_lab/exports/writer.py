"""Write an export folder: `make_qwen3_export` (Qwen3-0.6B text) and `make_qwen3_vl_export`
(Qwen3-VL-2B with visual), each from knobs, as an `ExportInfo`.

Used by tests, the demo, provisioning and the runners. File names and config keys follow what
MNN's `llmexport.py` and `npu/generate_llm_qnn.py` write (docs/mnn-export-layout.md); file *contents* are
deterministic filler with plausible headers, sized by `size_mb` (a 1 GiB set writes in seconds).

Layout (Qwen3-VL; the text export has the same minus the visual files and the two mixed configs)::

    config.json                      CPU LLM / CPU visual   (exporter's runtime config + mllm block)
    config_qnn.json                  QNN LLM / QNN visual   (llm_model qnn/llm.mnn, chunk_limits [B,1])
    config_cpu_llm_qnn_visual.json   CPU LLM / QNN visual
    config_qnn_cpu_visual.json       QNN LLM / CPU visual
    llm_config.json  export_args.json  tokenizer.mtok|tokenizer.txt  embeddings_bf16.bin
    llm.mnn  llm.mnn.weight  visual.mnn  visual.mnn.weight   (llm.mnn: a small real graph with the
                                     activation ranges, quant_graph.py)
    qnn/llm.mnn  qnn/graphllm<N>.bin (one per NPU segment; layers+1 by default)
    qnn/visual.mnn  qnn/graphvisual<N>.bin
    qnn/export_manifest.json         the optional sidecar (knob sidecar=True)
    virtual_behaviour.json           virtual lab only

Who writes what: the JSON files `configs`, the qnn/*.mnn stubs `stub`, the qnn/graph*.bin
`binaries` (real context binaries built by the host's QNN, else `context`'s stand-ins),
virtual_behaviour.json `behaviour` (plus what the knobs imply, `scenarios`); the knobs become an
`spec.ExportSpec`.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.pairs import BackendPair
from virtual_lab.exports.behaviour import (
    BEHAVIOUR_FILE,
    VirtualBehaviour,
    default_behaviour,
    merge_behaviour,
    validate_behaviour,
)
from virtual_lab.exports.binaries import real_binaries
from virtual_lab.exports.configs import (
    MANIFEST_PATH,
    TEXT_CONFIGS,
    VL_CONFIGS,
    base_config,
    export_args,
    llm_config,
    manifest,
)
from virtual_lab.exports.context import context_header
from virtual_lab.exports.quant_graph import llm_mnn_bytes
from virtual_lab.exports.scenarios import derived_faults, scenario_behaviour
from virtual_lab.exports.spec import ExportSpec, common_knobs, llm_io, parse_sizes, visual_io
from virtual_lab.exports.stub import graph_io, llm_plugins, stub_bytes, stub_graph, visual_plugins


@dataclass(frozen=True)
class ExportInfo:
    path: Path
    model_type: str
    configs: dict[str, str]  # backend pair -> config file name
    soc_id: int
    dsp_arch: str
    chunk_size: int
    hidden: int
    files: tuple[str, ...]  # relative paths present after the knobs were applied
    image_sizes: tuple[tuple[int, int], ...] = ()  # (width, height) as in --image_sizes
    is_visual: bool = False
    total_bytes: int = 0
    missing: tuple[str, ...] = ()

    def config_path(self, pair: str) -> Path:
        try:
            return self.path / self.configs[pair]
        except KeyError:
            raise ValueError(f"{self.path}: no config for backend pair {pair!r}; "
                             f"have {sorted(self.configs)}") from None


class _FillWriter:
    """Deterministic filler: one seeded 1 MiB block, rotated per file so files differ."""

    BLOCK = 1 << 20

    def __init__(self, seed: int) -> None:
        self._block = random.Random(seed).randbytes(self.BLOCK)
        self._twice = memoryview(self._block + self._block)

    def write(self, path: Path, size: int, header: bytes = b"") -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        offset = sum(path.name.encode()) * 4099 % self.BLOCK
        with open(path, "wb") as fh:
            fh.write(header[:size])
            left = size - min(len(header), size)
            while left > 0:
                n = min(left, self.BLOCK)
                fh.write(self._twice[offset:offset + n])
                left -= n
        return size


def _json(path: Path, data: Any) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=4, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return len(text.encode())


_MNN_HEADER = struct.pack("<II", 0x24, 0) + b"\x1c\x00\x2c\x00\x28\x00\x04\x00"
_TOKENIZER_TXT_HEADER = b"430 1\n3 0 0\n151643 151644 151645\n"


def _write_export(dst: Path, spec: ExportSpec, *, missing: Iterable[str],
                  behaviour: VirtualBehaviour | None, overwrite: bool) -> ExportInfo:
    dst = Path(dst)
    if dst.exists():
        if not overwrite:
            raise ValueError(f"{dst}: already exists (pass overwrite=True to replace it)")
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        else:
            dst.unlink()
    dst.mkdir(parents=True)
    fill = _FillWriter(spec.seed)
    total = 0

    base = base_config(spec)
    for pair in BackendPair.all(visual=spec.is_visual):
        cfg = dict(base)
        if pair.uses_qnn_llm:
            cfg["llm_model"] = "qnn/llm.mnn"
            cfg["chunk_limits"] = list(spec.chunk_limits)
        if pair.uses_qnn_visual:
            cfg["visual_model"] = "qnn/visual.mnn"
        total += _json(dst / pair.config_name, cfg)
    total += _json(dst / "llm_config.json", llm_config(spec))
    total += _json(dst / "export_args.json", export_args(spec, dst))

    # The NPU stubs: real MNN models holding one QNN Plugin op per context binary.
    llm_stub_plugins = llm_plugins(spec)
    stubs = {"qnn/llm.mnn": (llm_stub_plugins, llm_io(spec)["configs"], ["logits"])}
    vis_plugins = visual_plugins(spec) if spec.is_visual else []
    if spec.is_visual:
        stubs["qnn/visual.mnn"] = (vis_plugins, visual_io(spec)["configs"], list(spec.visual_outputs))
    used = 0
    for rel, (plugins, io_configs, outputs) in stubs.items():
        data = stub_bytes(json.dumps(stub_graph(io_configs, plugins, outputs), sort_keys=True))
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_bytes(data)
        used += len(data)
        total += len(data)

    # llm.mnn: a small real graph with the activation ranges (the quant check reads it).
    graph = llm_mnn_bytes(spec.layers, spec.scenario == "activation_saturation")
    (dst / "llm.mnn").write_bytes(graph)
    used += len(graph)
    total += len(graph)

    # Share of the size budget per big file; the last one takes the rounding remainder.
    budget = int(spec.size_mb * (1 << 20))
    llm_bins = [p.path for p in llm_stub_plugins]
    vis_bins = [p.path for p in vis_plugins]
    tok = "tokenizer.mtok" if spec.tokenizer == "mtok" else "tokenizer.txt"
    shares: list[tuple[str, float, bytes]] = [
        (tok, 0.02, _TOKENIZER_TXT_HEADER if spec.tokenizer == "txt" else b"430 4\n"),
        ("embeddings_bf16.bin", 0.15 if spec.is_visual else 0.25, b""),
    ]
    llm_bin_share = 0.2 if spec.is_visual else 0.25
    real = real_binaries([*llm_stub_plugins, *vis_plugins], spec)
    for p in llm_stub_plugins:
        if real is None:
            shares.append((p.path, llm_bin_share / len(llm_stub_plugins),
                           context_header(list(p.graph_names), spec, graph_io([p])[p.path])))
    if spec.is_visual:
        shares += [("visual.mnn", 0.02, _MNN_HEADER), ("visual.mnn.weight", 0.12, b"")]
        for p in vis_plugins:
            if real is None:
                shares.append((p.path, 0.12 / len(vis_plugins),
                               context_header(list(p.graph_names), spec, graph_io([p])[p.path])))
    for rel, data in (real or {}).items():  # real binaries are what QNN wrote, never padded
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_bytes(data)
        used += len(data)
        total += len(data)
    shares.append(("llm.mnn.weight", 0.0, b""))  # takes what is left (~0.45)
    for name, share, header in shares:
        size = int(budget * share) if share else max(budget - used, 0)
        size = max(size, len(header) + 64)
        used += size
        total += fill.write(dst / name, size, header)

    if spec.sidecar:
        total += _json(dst / MANIFEST_PATH, manifest(spec, dst, llm_bins, vis_bins))
    beh = behaviour if behaviour is not None else default_behaviour(spec.is_visual)
    beh = merge_behaviour(validate_behaviour(beh), derived_faults(spec))
    beh = merge_behaviour(beh, scenario_behaviour(spec))
    total += _json(dst / BEHAVIOUR_FILE, beh)

    removed = []
    for rel in missing:
        target = (dst / rel).resolve()
        if dst.resolve() not in target.parents:
            raise ValueError(f"missing={rel!r} points outside the export folder {dst}")
        if not target.exists():
            raise ValueError(f"missing={rel!r}: the export has no such file to remove")
        total -= target.stat().st_size
        target.unlink()
        removed.append(rel)

    files = tuple(sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file()))
    return ExportInfo(
        path=dst, model_type=spec.model_type, configs=dict(VL_CONFIGS if spec.is_visual else TEXT_CONFIGS),
        soc_id=spec.soc_id,
        dsp_arch=spec.dsp_arch, chunk_size=spec.chunk_size, hidden=spec.hidden, files=files,
        image_sizes=spec.image_sizes if spec.is_visual else (), is_visual=spec.is_visual,
        total_bytes=total, missing=tuple(removed),
    )


def make_qwen3_export(dst: Path, **knobs: Any) -> ExportInfo:
    """Qwen3-0.6B text export with QNN files.

    Knobs: size_mb=4, soc_id=69, dsp_arch="v79", vtcm_mb=8, chunk_size=128 (compiled),
    chunk_limits=None ([chunk_size, 1]; pass e.g. [256, 1] for a mismatch), tokenizer="mtok"|"txt",
    n_llm_graphs=29 (layers + 1), sampler_type="mixed", seed=0, scenario="healthy" (or
    "activation_saturation": QNN-LLM pairs answer fluent but wrong and their logits are
    "saturated"), qnn_binaries="auto" (qnn/graph*.bin built by the host's QNN where it can, else
    stand-ins; "real" or "stand-in" to insist), missing=() (relative paths to
    delete), behaviour=None (virtual_behaviour.json content), overwrite=True, sidecar=True
    (False: no qnn/export_manifest.json, as a real export has none)."""
    kw = dict(knobs)
    missing = kw.pop("missing", ())
    behaviour = kw.pop("behaviour", None)
    overwrite = bool(kw.pop("overwrite", True))
    common = common_knobs(kw, default_mb=4)
    spec = ExportSpec(
        model_type="qwen3", hf_name="Qwen3-0.6B", hidden=1024, layers=28, vocab=151936,
        is_visual=False, image_sizes=(), deepstack_placeholder=False, visual_outputs=(),
        n_llm_graphs=int(kw.pop("n_llm_graphs", 29)), n_visual_graphs=0, **common,
    )
    if kw:
        raise ValueError(f"make_qwen3_export: unknown knobs {sorted(kw)}")
    return _write_export(Path(dst), spec, missing=missing, behaviour=behaviour, overwrite=overwrite)


def make_qwen3_vl_export(dst: Path, **knobs: Any) -> ExportInfo:
    """Qwen3-VL-2B export with visual part, QNN files and the four backend-matrix configs.

    Knobs: those of make_qwen3_export (size_mb defaults to 6), plus image_sizes=((512, 512),)
    as (width, height) pairs or "WxH" strings (what --image_sizes compiled),
    deepstack_placeholder=False (True: deepstack_embeds compiled as upstream's [3,1,1]),
    visual_outputs=("image_embeds", "deepstack_feature") (upstream QNN keeps only image_embeds),
    n_visual_graphs=1."""
    kw = dict(knobs)
    missing = kw.pop("missing", ())
    behaviour = kw.pop("behaviour", None)
    overwrite = bool(kw.pop("overwrite", True))
    common = common_knobs(kw, default_mb=6)
    sizes = parse_sizes(kw.pop("image_sizes", ((512, 512),)))
    if not sizes:
        raise ValueError("image_sizes must name at least one WxH size")
    outputs = tuple(kw.pop("visual_outputs", ("image_embeds", "deepstack_feature")))
    spec = ExportSpec(
        model_type="qwen3_vl", hf_name="Qwen3-VL-2B-Instruct", hidden=2048, layers=28,
        vocab=151936, is_visual=True, image_sizes=sizes,
        deepstack_placeholder=bool(kw.pop("deepstack_placeholder", False)),
        visual_outputs=outputs, n_llm_graphs=int(kw.pop("n_llm_graphs", 29)),
        n_visual_graphs=int(kw.pop("n_visual_graphs", 1)), **common,
    )
    if kw:
        raise ValueError(f"make_qwen3_vl_export: unknown knobs {sorted(kw)}")
    return _write_export(Path(dst), spec, missing=missing, behaviour=behaviour, overwrite=overwrite)
