"""A prompt's reference positions rebuilt from its own first prefill call, for when no tokenizer
is at hand (a device, a captured stdout): docs/posdbg.md#a-reference-without-the-tokenizer.

The first call (all_seq_len 0) cannot show the chunk-local bug, and its full form shows where
each image starts: an image's pad tokens share one T position (t = 1 for an image), text rows
step by one. With the prompt length (listSize, or the summary's prompt tokens) that fixes every
segment, provided each image's pads start inside the first call.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.checks.mrope.calls import is_decode, split_runs
from harness.checks.mrope.posdbg import PosDump
from harness.checks.mrope.reference import Image, Positions, Segment, Text, Variant, reference_positions


def _pad_runs(rows: Sequence[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """(first pad row, number of rows) of every run of equal T positions (an image's pads);
    a run that reaches the last row may continue past it."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(rows) - 1:
        if rows[i + 1][0] == rows[i][0]:
            j = i
            while j + 1 < len(rows) and rows[j + 1][0] == rows[i][0]:
                j += 1
            out.append((i, j - i + 1))
            i = j + 1
        else:
            i += 1
    return out


def reference_from_first_chunk(
    dumps: Sequence[PosDump],
    images: Sequence[Image] | None = (),
    *,
    prompt_len: int | None = None,
    variant: Variant = Variant.MNN,
) -> Positions | None:
    """The first run's reference positions from its first prefill call, or None when the dump
    cannot anchor it (summary form, an image whose pads start after the first call, or an
    image the call cuts off when its grid is not given).

    `images`: the prompt's image grids in prompt order when the caller knows them (a fault
    that swaps h and w then shows against the expected grid); `None` = unknown, taken from the
    dump (the CLI on a captured stdout); `()` = a text-only prompt."""
    runs = split_runs(dumps)
    first = runs[0][0] if runs else None
    n = prompt_len if prompt_len is not None else (first.list_size if first is not None else None)
    if first is None or not n:
        return None
    if images is not None and not images:
        return reference_positions([Text(n)], variant=variant)
    if first.axes is None:
        return None
    rows = list(zip(*first.axes))
    # Rows past the prompt (padding) or past the list hold no token.
    limit = min(len(rows), n, first.list_size if first.list_size else n)
    if runs and len(runs[0]) > 1 and not is_decode(runs[0][1], n):
        limit = min(limit, max(0, runs[0][1].all_seq_len))
    rows = rows[:limit]
    pads = _pad_runs(rows)
    wanted = list(images) if images is not None else None
    if wanted is not None and len(pads) < len(wanted):
        return None  # an image starts after the first call: nothing anchors it
    segments: list[Segment] = []
    at = 0  # next token index
    for k, (start, count) in enumerate(pads):
        if wanted is not None and k >= len(wanted):
            break
        if start < 1 or start - 1 < at:
            return None  # no <|vision_start|> before the pads, or overlapping blocks
        if wanted is not None:
            img = wanted[k]
        else:
            if start + count >= len(rows):
                return None  # the pads run to the call's end: the grid is not known
            s = rows[start][0]
            img = Image(h=max(r[1] for r in rows[start:start + count]) - s + 1,
                        w=max(r[2] for r in rows[start:start + count]) - s + 1)
            if img.h * img.w != count:
                return None
        if start - 1 > at:
            segments.append(Text(start - 1 - at))
        segments.append(img)
        at = start - 1 + img.n_tokens
    if at > n:
        return None
    if n > at:
        segments.append(Text(n - at))
    return reference_positions(segments, variant=variant)
