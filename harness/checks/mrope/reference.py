"""Reference mRoPE positions for Qwen2-VL / Qwen3-VL style 3-axis (t, h, w) positions.

`reference_positions` computes the position of every prompt token, plus the decode
continuation, in the HF and MNN-runtime variants; `image_llm_grid` gives an image's LLM grid
after Qwen-VL's smart resize. The rules are written down in docs/posdbg.md#mrope-position-rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

AXIS_NAMES = ("T", "H", "W")


class Variant(str, Enum):
    """Where the text after an image restarts (the only place the implementations differ
    for single images).

    HF:          transformers `get_rope_index`: max(image positions) + 1 = start + max(t, h, w).
    MNN:         omni.cpp (3.6.1/HEAD): `vision_end` at start + max(h, w)
                 (docs/posdbg.md#mrope-position-rules).
    MNN_LAST_W:  older omni.hpp whose `MropeInfo::currentIdx()` is `mW.back() + 1` (and the
                 exporter's `vision.py` `cur_idx += w`): start + w. Differs when h > w.
    """

    HF = "hf"
    MNN = "mnn"
    MNN_LAST_W = "mnn_last_w"


class DecodeRule(str, Enum):
    """Position of decode step n (0-based) after a prompt of N tokens.

    COMPRESSED:   HF `cache_position + rope_delta` = max_pos + 1 + n; MNN
                  `gen_seq_len + mPositionIds.back()` gives the same value.
    TOKEN_COUNT:  some omni.cpp versions use `all_seq_len + i` = N + n (the raw token count),
                  which jumps ahead of the compressed positions after an image.
    """

    COMPRESSED = "compressed"
    TOKEN_COUNT = "token_count"


@dataclass(frozen=True)
class Text:
    """A run of `n` text tokens (chat-template tokens included)."""

    n: int


@dataclass(frozen=True)
class Image:
    """One image block: `<|vision_start|>`, t*h*w pad tokens, `<|vision_end|>` (t*h*w + 2 tokens).

    `h`, `w` are the LLM grid *after* the 2x2 merge (e.g. 512x512 px on Qwen3-VL -> 16 x 16).
    """

    h: int
    w: int
    t: int = 1

    @property
    def n_tokens(self) -> int:
        return self.t * self.h * self.w + 2


Segment = Text | Image


@dataclass(frozen=True)
class Positions:
    """Reference 3-axis positions of a prompt, extendable into decode with `row(i)`."""

    t: tuple[int, ...]
    h: tuple[int, ...]
    w: tuple[int, ...]
    decode_base: int  # position of decode step 0
    variant: Variant
    decode_rule: DecodeRule

    @property
    def prompt_len(self) -> int:
        return len(self.t)

    def __len__(self) -> int:
        return len(self.t)

    def row(self, i: int) -> tuple[int, int, int]:
        """Position of token i; i >= prompt_len are decode tokens."""
        if i < 0:
            raise ValueError(f"negative token index {i}")
        if i < len(self.t):
            return (self.t[i], self.h[i], self.w[i])
        p = self.decode_base + (i - len(self.t))
        return (p, p, p)

    def axis(self, k: int) -> tuple[int, ...]:
        return (self.t, self.h, self.w)[k]

    def rows(self, start: int, stop: int) -> list[tuple[int, int, int]]:
        return [self.row(i) for i in range(start, stop)]


def reference_positions(
    segments: Sequence[Segment],
    *,
    variant: Variant | str = Variant.MNN,
    decode_rule: DecodeRule | str = DecodeRule.COMPRESSED,
) -> Positions:
    """Positions of every prompt token for a prompt made of text runs and images."""
    variant = Variant(variant)
    decode_rule = DecodeRule(decode_rule)
    t: list[int] = []
    h: list[int] = []
    w: list[int] = []
    nxt = 0
    for seg in segments:
        if isinstance(seg, Text):
            if seg.n < 0:
                raise ValueError(f"Text run with negative length {seg.n}")
            for i in range(seg.n):
                t.append(nxt + i)
                h.append(nxt + i)
                w.append(nxt + i)
            nxt += seg.n
        elif isinstance(seg, Image):
            if min(seg.t, seg.h, seg.w) < 1:
                raise ValueError(f"Image grid must be >= 1 on every axis, got {seg}")
            t.append(nxt)  # <|vision_start|> is an ordinary text position
            h.append(nxt)
            w.append(nxt)
            start = nxt + 1
            for ti in range(seg.t):
                for hi in range(seg.h):
                    for wi in range(seg.w):
                        t.append(start + ti)
                        h.append(start + hi)
                        w.append(start + wi)
            if variant is Variant.HF:
                end = start + max(seg.t, seg.h, seg.w)
            elif variant is Variant.MNN:
                end = start + max(seg.h, seg.w)
            else:
                end = start + seg.w
            t.append(end)  # <|vision_end|>
            h.append(end)
            w.append(end)
            nxt = end + 1
        else:
            raise TypeError(f"segment must be Text or Image, got {seg!r}")
    if decode_rule is DecodeRule.TOKEN_COUNT:
        base = len(t)
    elif not t:
        base = 0
    elif variant is Variant.HF:
        base = max(max(t), max(h), max(w)) + 1
    else:
        base = w[-1] + 1  # mPositionIds.back() is the last W
    return Positions(tuple(t), tuple(h), tuple(w), base, variant, decode_rule)


def image_spans(ref: Positions) -> list[tuple[int, int]]:
    """(vision_start, vision_end) token indexes of each image block of a reference: an image's
    pad tokens share one T position (t = 1), text tokens step by one."""
    spans = []
    i = 0
    while i < ref.prompt_len - 1:
        if ref.t[i + 1] == ref.t[i]:
            j = i
            while j + 1 < ref.prompt_len and ref.t[j + 1] == ref.t[i]:
                j += 1
            spans.append((i - 1, j + 1))
            i = j + 1
        else:
            i += 1
    return spans


def smart_resize(
    height: int,
    width: int,
    *,
    factor: int = 32,
    min_pixels: int = 65536,
    max_pixels: int = 16777216,
) -> tuple[int, int]:
    """Qwen-VL smart resize (height, width) -> multiples of `factor` (32 for Qwen3-VL, 28 for
    Qwen2/2.5-VL), within the pixel limits. Python's round() is round-half-to-even like MNN."""
    if height < factor or width < factor:
        raise ValueError(
            f"Qwen-VL smart resize requires height and width >= factor, got {height}x{width} "
            f"with factor {factor}"
        )
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = ((height * width) / max_pixels) ** 0.5
        h_bar = max(factor, int(height / beta / factor) * factor)
        w_bar = max(factor, int(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = (min_pixels / (height * width)) ** 0.5
        h_bar = -(-int(height * beta) // factor) * factor
        w_bar = -(-int(width * beta) // factor) * factor
    return h_bar, w_bar


def image_llm_grid(
    height: int,
    width: int,
    *,
    patch_size: int = 16,
    merge_size: int = 2,
    min_pixels: int = 65536,
    max_pixels: int = 16777216,
) -> Image:
    """The LLM-side image grid (after merge) for an image forced to `<hw>height, width</hw>`.
    Defaults are Qwen3-VL (patch 16, factor 32); Qwen2/2.5-VL use patch 14 and 3136..12845056."""
    h_bar, w_bar = smart_resize(
        height, width, factor=patch_size * merge_size, min_pixels=min_pixels, max_pixels=max_pixels
    )
    return Image(h=h_bar // patch_size // merge_size, w=w_bar // patch_size // merge_size)
