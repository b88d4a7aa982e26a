"""The virtual lab's token-count rule (a prompt as mRoPE segments) and the `[POSDBG]` lines the
virtual runtime prints for a prompt (format: docs/posdbg.md).

The rule is the virtual lab's own, not a tokenizer's: tests rebuild the reference positions from
the same `virtual_prompt_segments` the runtime uses for its "prompt tokens num" line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_WORD_RE = re.compile(r"\w+|[^\w\s]")
_IMG_RE = re.compile(r"<img>(.*?)</img>", re.S)
_HW_RE = re.compile(r"<hw>\s*(\d+)\s*,\s*(\d+)\s*</hw>")
CHAT_PREFIX_TOKENS = 3  # <|im_start|> user \n
CHAT_SUFFIX_TOKENS = 5  # <|im_end|> \n <|im_start|> assistant \n


def virtual_prompt_segments(prompt: str, llm_config: Mapping[str, Any]) -> list:
    """The virtual lab's token-count rule as mRoPE segments (harness.checks.mrope Text/Image):
    one token per word or punctuation mark, the chat template's 3 + 5 tokens around the user
    turn, and each `<img>` as an image block whose grid comes from `<hw>H, W</hw>` (height first)
    or else llm_config image_size x image_size."""
    from harness.checks.mrope import Text, image_llm_grid  # lazy: only the runtime needs it

    segments: list = []
    pending = CHAT_PREFIX_TOKENS
    pos = 0
    for m in _IMG_RE.finditer(prompt):
        pending += len(_WORD_RE.findall(prompt[pos:m.start()]))
        hw = _HW_RE.search(m.group(1))
        size = int(llm_config.get("image_size", 420))
        height, width = (int(hw.group(1)), int(hw.group(2))) if hw else (size, size)
        if llm_config.get("is_visual"):
            if pending:
                segments.append(Text(pending))
            pending = 0
            segments.append(image_llm_grid(height, width))
        pos = m.end()
    pending += len(_WORD_RE.findall(prompt[pos:])) + CHAT_SUFFIX_TOKENS
    segments.append(Text(pending))
    return segments


def posdbg_lines(prompt: str, llm_config: Mapping[str, Any], *, mode: str,
                 chunk_limits: Sequence[int] = (128, 1), decode_tokens: int = 0,
                 full: bool = True) -> list[str]:
    """`[POSDBG]` lines the virtual runtime prints for `prompt` (delegates to virtual_lab.mrope_sim)."""
    from harness.checks import mrope  # lazy: virtual_lab may use the harness's reference
    from virtual_lab import mrope_sim

    ref = mrope.reference_positions(virtual_prompt_segments(prompt, llm_config))
    return mrope_sim.posdbg_lines(ref, chunk_limits=chunk_limits, mode=mode,
                                  decode_tokens=decode_tokens, full=full)
