"""A simulated MNN runtime's mRoPE positions, for the virtual `llm_demo` and for tests.

`prefill_chunks` is how MNN's `forwardVec` splits a prompt into forward calls;
`simulate_dumps` / `posdbg_lines` are what a runtime with a given behaviour (correct, the
chunk-local indexing bug, or a position list shorter than the prompt) writes into
`position_ids` and prints as `[POSDBG]` lines. The behaviours are described in
docs/posdbg.md#known-failure-shapes; the checker they exercise is `harness.checks.mrope`.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.checks.mrope import Positions, format_posdbg

POSDBG_MODES = ("ok", "chunk_local_bug", "past_end")


def prefill_chunks(prompt_len: int, chunk_limits: Sequence[int]) -> list[tuple[int, int, int]]:
    """(all_seq_len, real_rows, padded_seq_len) per prefill chunk, as MNN's `forwardVec` splits:
    blocks of max(chunk_limits); a remainder is padded to the smallest limit >= it."""
    limits = sorted({int(x) for x in chunk_limits})
    if len(limits) < 1 or limits[0] < 1:
        raise ValueError(f"chunk_limits must hold positive sizes, got {list(chunk_limits)}")
    block = limits[-1]
    chunks = []
    start = 0
    while start < prompt_len:
        real = min(block, prompt_len - start)
        padded = next(x for x in limits if x >= real)
        chunks.append((start, real, padded))
        start += real
    return chunks


def simulate_dumps(
    reference: Positions,
    *,
    chunk_limits: Sequence[int] = (128, 1),
    mode: str = "ok",
    decode_tokens: int = 0,
    list_size: int | None = None,
) -> list[tuple[int, int, int, tuple[tuple[int, ...], ...], int | None]]:
    """What a runtime with the given behaviour writes into `position_ids`, per forward call:
    (all_seq_len, seq_len, list_size, axes, gen_seq_len). Used by the virtual runtime and tests.

    mode: "ok"              row i of a chunk at all_seq_len A uses list[A + i];
          "chunk_local_bug" row i uses list[i] + A (the old omni.cpp indexing);
          "past_end"        the runtime's list holds only `list_size` entries (default: one
                            chunk, or prompt_len - 1), the rest falls back to A + i.
    Rows past the list's end always fall back to A + i on every axis (padding rows included).
    """
    if mode not in POSDBG_MODES:
        raise ValueError(f"posdbg mode must be one of {POSDBG_MODES}, got {mode!r}")
    n = reference.prompt_len
    block = max(int(x) for x in chunk_limits)
    if list_size is None:
        list_size = n if mode != "past_end" else max(0, min(block, n - 1))
    list_size = min(list_size, n)
    out: list[tuple[int, int, int, tuple[tuple[int, ...], ...], int | None]] = []
    for start, _real, padded in prefill_chunks(n, chunk_limits):
        axes: list[list[int]] = [[], [], []]
        for i in range(padded):
            idx = i if mode == "chunk_local_bug" else start + i
            row: tuple[int, ...]
            if idx < list_size:
                row = reference.row(idx)
                if mode == "chunk_local_bug":
                    row = tuple(v + start for v in row)
            else:
                row = (start + i,) * 3
            for k in range(3):
                axes[k].append(row[k])
        out.append((start, padded, list_size, tuple(tuple(a) for a in axes), None))
    for step in range(decode_tokens):
        a = n + step
        last = reference.row(a)
        out.append((a, 1, list_size, ((last[0],), (last[1],), (last[2],)), step + 1))
    return out


def posdbg_lines(
    reference: Positions,
    *,
    chunk_limits: Sequence[int] = (128, 1),
    mode: str = "ok",
    decode_tokens: int = 0,
    list_size: int | None = None,
    full: bool = True,
) -> list[str]:
    """`[POSDBG]` lines a runtime with the given behaviour prints (see `simulate_dumps`)."""
    return [
        format_posdbg(a, s, ls, axes, full=full, gen_seq_len=g)
        for a, s, ls, axes, g in simulate_dumps(
            reference, chunk_limits=chunk_limits, mode=mode, decode_tokens=decode_tokens,
            list_size=list_size,
        )
    ]
