"""A GGUF's byte-level BPE tokenizer (`tokenizer.ggml.model: gpt2`: SmolLM2, Llama 3, Qwen) as a
Hugging Face `tokenizer.json`, the file ExecuTorch's LLM runners (`qnn_llama_runner`,
`TextLLMRunner`) and its exporters' calibration read. The GGUF keeps the vocabulary (byte-level
pieces), the merges and each token's type; the pre-tokenizer is named (`tokenizer.ggml.pre`) and
its splitting rule spelled out here per name (llama.cpp's `llama-vocab.cpp` table)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.errors import ArtifactError

# GGUF token types (gguf-py's TokenType): control and user-defined tokens are "added tokens"
# in tokenizer.json (matched whole, before the BPE).
_CONTROL, _USER_DEFINED = 3, 4

# GPT-2's split rule (the ByteLevel pre-tokenizer's own regex, use_regex true).
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
# What each `tokenizer.ggml.pre` splits before the byte-level step (HF's pre_tokenizer Sequence).
_PRE: Mapping[str, Sequence[Mapping[str, object]]] = {
    # SmolLM / StarCoder: every digit alone, then GPT-2's rule
    "smollm": ({"type": "Digits", "individual_digits": True}, _BYTE_LEVEL),
    "starcoder": ({"type": "Digits", "individual_digits": True}, _BYTE_LEVEL),
    "gpt2": (_BYTE_LEVEL,),
    "default": (_BYTE_LEVEL,),
}


def tokenizer_json(fields: Mapping[str, Any], *, source: str) -> dict[str, object]:
    """The tokenizer.json of a GGUF's `tokenizer.ggml.*` fields (their decoded values)."""
    model = fields.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise ArtifactError(f"{source}: tokenizer.ggml.model is {model!r}; only byte-level BPE ('gpt2') is "
                            "converted to tokenizer.json (SmolLM2, Llama 3, Qwen GGUFs)")
    pre = str(fields.get("tokenizer.ggml.pre", "default"))
    if pre not in _PRE:
        raise ArtifactError(f"{source}: tokenizer.ggml.pre {pre!r} has no known split rule here "
                            f"(known: {', '.join(sorted(_PRE))}); add it to harness/etllama/tokenizer_json.py")
    tokens: list[str] = list(fields["tokenizer.ggml.tokens"])
    types: list[int] = list(fields.get("tokenizer.ggml.token_type") or [1] * len(tokens))
    merges: list[str] = list(fields.get("tokenizer.ggml.merges") or [])
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": ty == _CONTROL} for i, (t, ty) in enumerate(zip(tokens, types))
             if ty in (_CONTROL, _USER_DEFINED)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [dict(p) for p in _PRE[pre]]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }


def special_tokens(fields: Mapping[str, Any]) -> dict[str, str]:
    """tokenizer_config.json's bos/eos (ExecuTorch's HF tokenizer reads them beside tokenizer.json)."""
    tokens: list[str] = list(fields["tokenizer.ggml.tokens"])
    out = {}
    for key in ("bos", "eos"):
        tid = fields.get(f"tokenizer.ggml.{key}_token_id")
        if tid is not None and 0 <= int(tid) < len(tokens):
            out[f"{key}_token"] = tokens[int(tid)]
    return out


__all__ = ["special_tokens", "tokenizer_json"]
