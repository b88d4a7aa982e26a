"""A tiny llama-architecture GGUF written with the `gguf` package's own writer: 2 layers, dim 32,
a byte-level BPE vocabulary (GPT-2's 256 byte pieces, three merges, SmolLM2's control tokens),
one tensor Q8_0-quantized as SmolLM2's embedding is, the rest F32; tied embeddings (no output.weight)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h e", "l l", "he ll"]
DIM, LAYERS, HIDDEN, HEADS, KV_HEADS = 32, 2, 64, 4, 2


def byte_pieces() -> list[str]:
    """GPT-2's bytes -> printable characters table, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return [chars[b] for b in range(256)]


def tokens() -> list[str]:
    return SPECIALS + byte_pieces() + ["he", "ll", "hell"]


def write(path: Path, *, arch: str = "llama", seed: int = 0) -> dict[str, np.ndarray]:
    """Write the GGUF; returns the float tensors written (GGUF names; the Q8_0 one before quantizing)."""
    import gguf

    rng = np.random.default_rng(seed)
    vocab = tokens()
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(HIDDEN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(vocab)
    w.add_token_types([3] * len(SPECIALS) + [1] * (len(vocab) - len(SPECIALS)))
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    head = DIM // HEADS
    shapes = {"token_embd.weight": (len(vocab), DIM), "output_norm.weight": (DIM,)}
    for i in range(LAYERS):
        shapes.update({f"blk.{i}.attn_norm.weight": (DIM,), f"blk.{i}.ffn_norm.weight": (DIM,),
                       f"blk.{i}.attn_q.weight": (DIM, DIM), f"blk.{i}.attn_k.weight": (KV_HEADS * head, DIM),
                       f"blk.{i}.attn_v.weight": (KV_HEADS * head, DIM), f"blk.{i}.attn_output.weight": (DIM, DIM),
                       f"blk.{i}.ffn_gate.weight": (HIDDEN, DIM), f"blk.{i}.ffn_up.weight": (HIDDEN, DIM),
                       f"blk.{i}.ffn_down.weight": (DIM, HIDDEN)})
    written = {}
    for name, shape in shapes.items():
        value = (1.0 + 0.1 * rng.standard_normal(shape) if len(shape) == 1 else 0.2 * rng.standard_normal(shape))
        value = value.astype(np.float32)
        written[name] = value
        if name == "token_embd.weight":
            q = gguf.quants.quantize(value, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return written
