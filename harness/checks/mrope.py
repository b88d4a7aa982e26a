"""Chunked-prefill mRoPE position checks for Qwen2-VL / Qwen3-VL style 3-axis positions.

Three parts:

1. A reference computation (`reference_positions`) of the (t, h, w) position of every prompt
   token, plus the decode continuation, in the HF and MNN-runtime variants (mnn-llm.md §6).
2. A parser/checker for position dumps printed by an instrumented runtime (`[POSDBG]` lines),
   comparing every prefill chunk with the reference slice `[all_seq_len, all_seq_len+seq_len)`
   and naming the known failure shapes: the chunk-local indexing bug (chunk k uses
   `list[i] + k*B` instead of `list[k*B + i]`, mnn-llm.md §4(b)) and rows that ran past the end
   of the runtime's position list (silent fallback to sequential positions, all axes equal).
3. A black-box check (`chunked_equivalence`): greedy output with `chunk_limits [128, 1]` must
   equal the output with one chunk covering the prompt.

`[POSDBG]` line formats (what an instrumented `Omni::gen_position_ids` prints, one line per
call; the virtual runtime prints them with `format_posdbg`):

    full:    [POSDBG] all_seq_len=0 seq_len=128 listSize=273 | ax0=0,1,2,... ax1=0,1,... ax2=0,1,...
    summary: [POSDBG] all_seq_len=256 seq_len=128 listSize=273 | ax0[first=256 min=256 max=383 sum=40896 last=383] ax1[...] ax2[...]

- Before `|`: `key=value` fields in any order. `all_seq_len` and `seq_len` are required;
  `listSize` (the runtime's `mPositionIds` length) and `gen_seq_len` (> 0 in decode) optional.
- After `|`: axis 0 = T, 1 = H, 2 = W, in that order. Full form: `axN=` comma-separated values,
  exactly `seq_len` of them (padding rows included). Summary form: `axN[k=v ...]` with any of
  `first last min max sum` (over all `seq_len` rows, padding included); only the keys present
  are compared.
- Anything may precede `[POSDBG]` on the line (logcat tags, timestamps).

Padding rows (the remainder chunk is zero-padded up to a `chunk_limits` size) are not compared
in the full form; in the summary form they are expected to hold the runtime's fallback value
(`all_seq_len + i` on every axis), because a summary cannot separate them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Sequence

from harness.errors import HarnessError

AXIS_NAMES = ("T", "H", "W")


# --------------------------------------------------------------------------------------------
# 1. Reference positions
# --------------------------------------------------------------------------------------------


class Variant(str, Enum):
    """Where the text after an image restarts (the only place the implementations differ
    for single images).

    HF:          transformers `get_rope_index`: max(image positions) + 1 = start + max(t, h, w).
    MNN:         omni.cpp (3.6.1/HEAD): `vision_end` at start + max(h, w) (mnn-llm.md §6).
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


# --------------------------------------------------------------------------------------------
# 2. [POSDBG] dumps: format, parse, simulate, check
# --------------------------------------------------------------------------------------------

POSDBG_TAG = "[POSDBG]"
SUMMARY_KEYS = ("first", "min", "max", "sum", "last")
POSDBG_MODES = ("ok", "chunk_local_bug", "past_end")

_FIELD_RE = re.compile(r"(\w+)=(-?\d+)")
_FULL_AX_RE = re.compile(r"\bax([012])=([-\d,]*)")
_SUM_AX_RE = re.compile(r"\bax([012])\[([^\]]*)\]")


@dataclass(frozen=True)
class PosDump:
    """One parsed `[POSDBG]` line."""

    all_seq_len: int
    seq_len: int
    list_size: int | None = None
    gen_seq_len: int | None = None
    axes: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None  # full form
    summary: tuple[dict[str, int], dict[str, int], dict[str, int]] | None = None  # summary form
    line_no: int = 0

    @property
    def is_decode(self) -> bool:
        return bool(self.gen_seq_len)


def _summarize(values: Sequence[int]) -> dict[str, int]:
    if not values:
        return {}
    return {
        "first": values[0],
        "min": min(values),
        "max": max(values),
        "sum": sum(values),
        "last": values[-1],
    }


def format_posdbg(
    all_seq_len: int,
    seq_len: int,
    list_size: int | None,
    axes: Sequence[Sequence[int]],
    *,
    full: bool = True,
    gen_seq_len: int | None = None,
) -> str:
    """One `[POSDBG]` line as an instrumented runtime prints it (see module docstring)."""
    if len(axes) != 3 or any(len(a) != seq_len for a in axes):
        raise ValueError(f"axes must be 3 sequences of seq_len={seq_len} values")
    head = f"{POSDBG_TAG} all_seq_len={all_seq_len} seq_len={seq_len}"
    if list_size is not None:
        head += f" listSize={list_size}"
    if gen_seq_len is not None:
        head += f" gen_seq_len={gen_seq_len}"
    if full:
        body = " ".join(f"ax{k}=" + ",".join(str(v) for v in axes[k]) for k in range(3))
    else:
        parts = []
        for k in range(3):
            s = _summarize(list(axes[k]))
            parts.append(f"ax{k}[" + " ".join(f"{key}={s[key]}" for key in SUMMARY_KEYS if key in s) + "]")
        body = " ".join(parts)
    return f"{head} | {body}"


def parse_posdbg(text: str) -> list[PosDump]:
    """Every `[POSDBG]` line in a log, in order. A malformed line raises HarnessError naming it."""
    dumps: list[PosDump] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        pos = line.find(POSDBG_TAG)
        if pos < 0:
            continue
        rest = line[pos + len(POSDBG_TAG):]
        head, sep, body = rest.partition("|")
        fields = {k: int(v) for k, v in _FIELD_RE.findall(head)}
        if not sep or "all_seq_len" not in fields or "seq_len" not in fields:
            raise HarnessError(
                f"log line {line_no}: malformed {POSDBG_TAG} line (needs 'all_seq_len=', 'seq_len=' "
                f"and '| ax0... ax1... ax2...'): {line.strip()[:200]!r}. Fix the runtime's position "
                f"dump to the format documented in harness/checks/mrope.py."
            )
        seq_len = fields["seq_len"]
        full = {int(k): v for k, v in _FULL_AX_RE.findall(body)}
        summ = {int(k): v for k, v in _SUM_AX_RE.findall(body)}
        axes = summary = None
        if len(full) == 3:
            try:
                parsed = [tuple(int(x) for x in full[k].split(",") if x != "") for k in range(3)]
            except ValueError:
                parsed = []
            if len(parsed) != 3 or any(len(a) != seq_len for a in parsed):
                raise HarnessError(
                    f"log line {line_no}: {POSDBG_TAG} full form must list seq_len={seq_len} integers "
                    f"per axis, got {[len(a) for a in parsed] or 'unparsable values'}: "
                    f"{line.strip()[:200]!r}"
                )
            axes = (parsed[0], parsed[1], parsed[2])
        elif len(summ) == 3:
            dicts = []
            for k in range(3):
                d = {key: int(v) for key, v in _FIELD_RE.findall(summ[k]) if key in SUMMARY_KEYS}
                if not d:
                    raise HarnessError(
                        f"log line {line_no}: {POSDBG_TAG} summary ax{k}[...] has none of "
                        f"{', '.join(SUMMARY_KEYS)}: {line.strip()[:200]!r}"
                    )
                dicts.append(d)
            summary = (dicts[0], dicts[1], dicts[2])
        else:
            raise HarnessError(
                f"log line {line_no}: {POSDBG_TAG} line needs ax0, ax1 and ax2 in full "
                f"('ax0=1,2,3') or summary ('ax0[first=1 last=3]') form: {line.strip()[:200]!r}"
            )
        dumps.append(
            PosDump(
                all_seq_len=fields["all_seq_len"],
                seq_len=seq_len,
                list_size=fields.get("listSize"),
                gen_seq_len=fields.get("gen_seq_len"),
                axes=axes,
                summary=summary,
                line_no=line_no,
            )
        )
    return dumps


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
    out = []
    for start, _real, padded in prefill_chunks(n, chunk_limits):
        axes: list[list[int]] = [[], [], []]
        for i in range(padded):
            idx = i if mode == "chunk_local_bug" else start + i
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
        row = reference.row(a)
        out.append((a, 1, list_size, ((row[0],), (row[1],), (row[2],)), step + 1))
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


# Finding kinds
OK = "ok"
CHUNK_LOCAL_BUG = "chunk_local_bug"
PAST_END = "past_end"
MISMATCH = "mismatch"
DECODE_MISMATCH = "decode_mismatch"
LENGTH_MISMATCH = "length_mismatch"
NO_DUMPS = "no_dumps"
RUN_COUNT = "run_count"

_HINTS = {
    CHUNK_LOCAL_BUG: (
        "the runtime indexes its position list with the chunk-local row i and adds all_seq_len "
        "(list[i] + k*B instead of list[k*B + i]); fix Omni::gen_position_ids to read "
        "mPositionIds[all_seq_len + i] without adding all_seq_len (mnn-llm.md §4(b))"
    ),
    PAST_END: (
        "prompt rows were forwarded past the end of the runtime's position list and silently got "
        "sequential positions (all axes equal); the embedding rows and the position list disagree "
        "(image split across chunks, reuse_kv history, or prefix tokens) (mnn-llm.md §4(a))"
    ),
    MISMATCH: "positions differ from the reference in an unrecognised way; compare the full dump",
    DECODE_MISMATCH: (
        "decode positions must continue from max prompt position + 1 (rope_delta); a runtime "
        "using the raw token count (all_seq_len + i) jumps ahead after an image"
    ),
    LENGTH_MISMATCH: (
        "the runtime built more positions than the reference prompt has tokens: the reference "
        "segments (chat-template tokens, image grid after merge) do not describe this prompt"
    ),
    NO_DUMPS: (
        "no [POSDBG] lines in the log: the runtime is not instrumented, or it wrote to logcat "
        "(MNN_USE_LOGCAT) instead of stdout"
    ),
    RUN_COUNT: "pass one reference per prompt run (all_seq_len restarts at 0 for each prompt)",
}


@dataclass(frozen=True)
class PositionFinding:
    kind: str
    message: str
    run: int = 0
    chunk: int | None = None  # prefill chunk index within the run; None for decode/global
    decode_step: int | None = None
    all_seq_len: int | None = None
    seq_len: int | None = None
    axis: int | None = None
    index: int | None = None  # global token index of the first differing row
    expected: object = None
    got: object = None
    line_no: int | None = None

    @property
    def hint(self) -> str:
        return _HINTS.get(self.kind, "")

    def explain(self, *, with_hint: bool = True) -> str:
        where = f"run {self.run}"
        if self.chunk is not None:
            where += f", prefill chunk {self.chunk}"
        if self.decode_step is not None:
            where += f", decode step {self.decode_step}"
        if self.all_seq_len is not None:
            where += f" (all_seq_len={self.all_seq_len}, seq_len={self.seq_len})"
        if self.line_no:
            where += f", log line {self.line_no}"
        text = f"[{self.kind}] {where}: {self.message}"
        if with_hint and self.hint:
            text += f"\n    what to do: {self.hint}"
        return text


def split_runs(dumps: Sequence[PosDump]) -> list[list[PosDump]]:
    """One list per prompt: a prefill dump at all_seq_len 0 starts a new run."""
    runs: list[list[PosDump]] = []
    for d in dumps:
        if not runs or (d.all_seq_len == 0 and not d.is_decode):
            runs.append([])
        runs[-1].append(d)
    return runs


def _expected_rows(ref: Positions, d: PosDump) -> tuple[list[tuple[int, int, int]], int]:
    """(rows the runtime must print for this call, number of real rows to compare strictly)."""
    a, s, n = d.all_seq_len, d.seq_len, ref.prompt_len
    if d.is_decode or a >= n:
        return ref.rows(a, a + s), s
    real = min(s, n - a)
    rows = ref.rows(a, a + real) + [(a + i,) * 3 for i in range(real, s)]  # padding fallback
    return rows, real


def _chunk_local_rows(ref: Positions, d: PosDump, list_size: int) -> list[tuple[int, int, int]]:
    a = d.all_seq_len
    return [
        tuple(v + a for v in ref.row(i)) if i < list_size else (a + i,) * 3
        for i in range(d.seq_len)
    ]


def _summary_matches(summary, rows: Sequence[tuple[int, int, int]]) -> tuple[bool, int, str, int, int]:
    for k in range(3):
        want = _summarize([r[k] for r in rows])
        for key, got in summary[k].items():
            if want.get(key) != got:
                return False, k, key, want.get(key, -1), got
    return True, -1, "", 0, 0


def _first_diff(got_rows, want_rows, count) -> tuple[int, int] | None:
    for i in range(count):
        for k in range(3):
            if got_rows[i][k] != want_rows[i][k]:
                return i, k
    return None


def check_positions(
    dumps: Sequence[PosDump],
    reference: Positions | Sequence[Positions],
) -> list[PositionFinding]:
    """Compare every dumped forward call with the reference. Empty list = all chunks correct."""
    if not dumps:
        return [PositionFinding(NO_DUMPS, "expected position dumps, found none")]
    runs = split_runs(dumps)
    if isinstance(reference, Positions):
        refs = [reference] * len(runs)
    else:
        refs = list(reference)
        if len(refs) != len(runs):
            return [
                PositionFinding(
                    RUN_COUNT, f"{len(runs)} prompt runs in the dump but {len(refs)} references given"
                )
            ]
    findings: list[PositionFinding] = []
    for run_idx, (run, ref) in enumerate(zip(runs, refs)):
        findings.extend(_check_run(run_idx, run, ref))
    return findings


def _check_run(run_idx: int, run: Sequence[PosDump], ref: Positions) -> list[PositionFinding]:
    findings: list[PositionFinding] = []
    n = ref.prompt_len
    chunk = 0
    step = 0
    reported_length = False
    for d in run:
        decode = d.is_decode or d.all_seq_len >= n
        base = dict(
            run=run_idx,
            chunk=None if decode else chunk,
            decode_step=step if decode else None,
            all_seq_len=d.all_seq_len,
            seq_len=d.seq_len,
            line_no=d.line_no,
        )
        if decode:
            step += 1
        else:
            chunk += 1
        list_size = d.list_size if d.list_size is not None else n
        if d.list_size is not None and d.list_size > n and not reported_length:
            reported_length = True
            findings.append(
                PositionFinding(
                    LENGTH_MISMATCH,
                    f"runtime listSize={d.list_size} but the reference prompt has {n} tokens",
                    expected=n, got=d.list_size, **base,
                )
            )
        want, real = _expected_rows(ref, d)
        # Rows of this call that the runtime's list covers; the rest of the real rows ran past it.
        in_list = real if decode else max(0, min(real, list_size - d.all_seq_len))
        if in_list < real:
            first = d.all_seq_len + in_list
            findings.append(
                PositionFinding(
                    PAST_END,
                    f"prompt rows {first}..{d.all_seq_len + real - 1} lie past the runtime's position "
                    f"list (listSize={list_size}, prompt has {n} tokens) and fell back to sequential "
                    f"positions; token {first}: expected {ref.row(first)}, fallback {(first,) * 3}",
                    index=first, expected=ref.row(first), got=(first,) * 3, **base,
                )
            )
        if d.axes is not None:
            got = list(zip(*d.axes))
            diff = _first_diff(got, want, in_list)
            if diff is None:
                continue
            i, k = diff
            idx = d.all_seq_len + i
            if decode:
                kind = DECODE_MISMATCH
            elif _first_diff(got, _chunk_local_rows(ref, d, list_size), in_list) is None:
                kind = CHUNK_LOCAL_BUG
            else:
                kind = MISMATCH
            findings.append(
                PositionFinding(
                    kind,
                    f"axis {k} ({AXIS_NAMES[k]}) first differs at token {idx} (row {i} of the call): "
                    f"expected {want[i][k]}, got {got[i][k]}",
                    axis=k, index=idx, expected=want[i][k], got=got[i][k], **base,
                )
            )
        elif in_list == real:  # a summary mixing past-end rows cannot be compared row-wise
            assert d.summary is not None
            ok, k, key, exp, got_v = _summary_matches(d.summary, want)
            if ok:
                continue
            if decode:
                kind = DECODE_MISMATCH
            elif _summary_matches(d.summary, _chunk_local_rows(ref, d, list_size))[0]:
                kind = CHUNK_LOCAL_BUG
            else:
                kind = MISMATCH
            findings.append(
                PositionFinding(
                    kind,
                    f"axis {k} ({AXIS_NAMES[k]}) summary {key}: expected {exp}, got {got_v} "
                    f"(summary form: the first differing token cannot be located; print the full form)",
                    axis=k, expected=exp, got=got_v, **base,
                )
            )
    return findings


def check_position_log(
    text: str, reference: Positions | Sequence[Positions]
) -> list[PositionFinding]:
    """Parse `[POSDBG]` lines from a runtime log and check them (see `check_positions`)."""
    return check_positions(parse_posdbg(text), reference)


def assert_positions_ok(findings: Iterable[PositionFinding]) -> None:
    """Raise AssertionError listing every finding (which chunk, axis, index, expected vs got)."""
    findings = list(findings)
    if not findings:
        return
    kinds = sorted({f.kind for f in findings})
    lines = [f"mRoPE position check failed: {len(findings)} finding(s) ({', '.join(kinds)})"]
    lines += ["  " + f.explain(with_hint=False) for f in findings]
    lines += [f"what to do ({kind}): {_HINTS[kind]}" for kind in kinds if kind in _HINTS]
    raise AssertionError("\n".join(lines))


# --------------------------------------------------------------------------------------------
# 3. Black-box: chunked prefill vs one chunk
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EquivalenceResult:
    equal: bool
    label: str
    reason: str
    first_diff: int | None = None  # character offset of the first difference
    chunked_excerpt: str = ""
    single_excerpt: str = ""
    compared_chars: int = 0
    extra: dict = field(default_factory=dict)

    def explain(self) -> str:
        name = f" ({self.label})" if self.label else ""
        if self.equal:
            return f"chunked prefill matches single-chunk prefill{name} over {self.compared_chars} chars"
        text = f"chunked prefill differs from single-chunk prefill{name}: {self.reason}"
        if self.first_diff is not None:
            text += (
                f"\n    chunk_limits [B,1]: ...{self.chunked_excerpt!r}"
                f"\n    one chunk:          ...{self.single_excerpt!r}"
                "\n    what to do: greedy output must not depend on the chunk size; with an image "
                "this points at chunk-local mRoPE positions or deepstack rows split across chunks "
                "(mnn-llm.md §4(a-c)); run an instrumented runtime and check_position_log()"
            )
        return text


def _normalize_output(text: str) -> str:
    return text.replace("\r\n", "\n").rstrip()


def chunked_equivalence(
    outputs_chunked: str,
    outputs_single: str,
    *,
    label: str = "",
    compare_chars: int | None = None,
) -> EquivalenceResult:
    """Compare greedy output produced with `chunk_limits [B, 1]` against one chunk covering the
    whole prompt. Trailing whitespace and CRLF are ignored; `compare_chars` limits the comparison
    to a prefix (late tokens may legitimately flip on fp16 rounding). Two empty outputs are a
    failure: there is nothing to compare."""
    a = _normalize_output(outputs_chunked)
    b = _normalize_output(outputs_single)
    if compare_chars is not None:
        a, b = a[:compare_chars], b[:compare_chars]
    if not a and not b:
        return EquivalenceResult(False, label, "both outputs are empty: nothing to compare "
                                 "(did both runs fail?)")
    if a == b:
        return EquivalenceResult(True, label, "", compared_chars=len(a))
    i = 0
    limit = min(len(a), len(b))
    while i < limit and a[i] == b[i]:
        i += 1
    lo = max(0, i - 30)
    if i == limit:
        reason = f"one output is a prefix of the other (lengths {len(a)} vs {len(b)})"
    else:
        reason = f"first difference at character {i}"
    return EquivalenceResult(
        False, label, reason, first_diff=i,
        chunked_excerpt=a[lo:i + 30], single_excerpt=b[lo:i + 30], compared_chars=limit,
    )


def assert_chunked_equivalent(result: EquivalenceResult) -> None:
    if not result.equal:
        raise AssertionError(result.explain())


# --------------------------------------------------------------------------------------------
# 4. A reference without the tokenizer
# --------------------------------------------------------------------------------------------


def reference_from_first_chunk(
    dumps: Sequence[PosDump],
    images: Sequence[Image] = (),
    *,
    prompt_len: int | None = None,
    variant: Variant = Variant.MNN,
) -> Positions | None:
    """Rebuild a prompt's reference positions from its own first prefill call.

    On a device the harness has no tokenizer, so it cannot count the text tokens around an
    image. The first call (all_seq_len 0) cannot show the chunk-local bug (k = 0) and, in
    the full form, shows where the image starts: the first row whose three axes differ is
    the image's second pad token, two rows after `<|vision_start|>`. With one image (or
    none) and the prompt length (listSize, or the summary's prompt tokens) that fixes every
    segment. Returns None when the dump cannot anchor it (summary form, several images, or
    an image starting past the first call); callers then report the check as not possible.
    """
    first = next((d for d in dumps if d.all_seq_len == 0 and not d.is_decode), None)
    n = prompt_len if prompt_len is not None else (first.list_size if first is not None else None)
    if first is None or n is None or len(images) > 1:
        return None
    if not images:
        return reference_positions([Text(n)], variant=variant)
    if first.axes is None:
        return None
    img = images[0]
    rows = list(zip(*first.axes))
    diverge = next((i for i, (t, h, w) in enumerate(rows) if not t == h == w), None)
    if diverge is None or diverge < 2:
        return None
    before = diverge - 2
    after = n - before - img.n_tokens
    if after < 0:
        return None
    segments: list[Segment] = [Text(before)] if before else []
    segments.append(img)
    if after:
        segments.append(Text(after))
    return reference_positions(segments, variant=variant)
