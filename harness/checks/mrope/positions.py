"""Check `[POSDBG]` dumps against reference positions, chunk by chunk.

Every prefill chunk is compared with the reference slice `[all_seq_len, all_seq_len+seq_len)`
and the known failure shapes are named (docs/posdbg.md#known-failure-shapes): the chunk-local
indexing bug and rows that ran past the end of the runtime's position list. On a device, where
there is no tokenizer, `reference_from_first_chunk` rebuilds the reference from the dump itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.checks.mrope.posdbg import PosDump, parse_posdbg, summarize_axis
from harness.checks.mrope.reference import (
    AXIS_NAMES,
    Image,
    Positions,
    Segment,
    Text,
    Variant,
    reference_positions,
)

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
        "mPositionIds[all_seq_len + i] without adding all_seq_len (docs/posdbg.md#known-failure-shapes)"
    ),
    PAST_END: (
        "prompt rows were forwarded past the end of the runtime's position list and silently got "
        "sequential positions (all axes equal); the embedding rows and the position list disagree "
        "(image split across chunks, reuse_kv history, or prefix tokens) "
        "(docs/posdbg.md#known-failure-shapes)"
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
    rows: list[tuple[int, int, int]] = []
    for i in range(d.seq_len):
        if i < list_size:
            t, h, w = ref.row(i)
            rows.append((t + a, h + a, w + a))
        else:
            rows.append((a + i, a + i, a + i))
    return rows


def _summary_matches(summary, rows: Sequence[tuple[int, int, int]]) -> tuple[bool, int, str, int, int]:
    for k in range(3):
        want = summarize_axis([r[k] for r in rows])
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
        base: dict[str, Any] = {
            "run": run_idx,
            "chunk": None if decode else chunk,
            "decode_step": step if decode else None,
            "all_seq_len": d.all_seq_len,
            "seq_len": d.seq_len,
            "line_no": d.line_no,
        }
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
