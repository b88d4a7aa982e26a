"""Check `[POSDBG]` dumps against reference positions, chunk by chunk.

Every prefill chunk is compared with the reference slice `[all_seq_len, all_seq_len+seq_len)`
and the known failure shapes are named (docs/posdbg.md#known-failure-shapes): the chunk-local
indexing bug and rows that ran past the end of the runtime's position list. On a device, where
there is no tokenizer, `reference_from_first_chunk` rebuilds the reference from the dump itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

from harness.checks.mrope.calls import Call, RunRows, account_rows, split_runs
from harness.checks.mrope.posdbg import PosDump, parse_posdbg, summarize_axis
from harness.checks.mrope.reference import AXIS_NAMES, Positions, image_spans
from harness.findings import Finding, Where


class PositionKind(StrEnum):
    """What a position finding is (docs/posdbg.md#known-failure-shapes)."""

    CHUNK_LOCAL_BUG = "chunk_local_bug"
    PAST_END = "past_end"
    MISMATCH = "mismatch"
    DECODE_MISMATCH = "decode_mismatch"
    LENGTH_MISMATCH = "length_mismatch"
    NO_DUMPS = "no_dumps"
    RUN_COUNT = "run_count"
    ROW_INFLATION = "row_inflation"
    NO_REFERENCE = "no_reference"
    MALFORMED_DUMP = "malformed_dump"


OK = "ok"  # the CLI's word for a run without findings
CHUNK_LOCAL_BUG = PositionKind.CHUNK_LOCAL_BUG
PAST_END = PositionKind.PAST_END
MISMATCH = PositionKind.MISMATCH
DECODE_MISMATCH = PositionKind.DECODE_MISMATCH
LENGTH_MISMATCH = PositionKind.LENGTH_MISMATCH
NO_DUMPS = PositionKind.NO_DUMPS
RUN_COUNT = PositionKind.RUN_COUNT
ROW_INFLATION = PositionKind.ROW_INFLATION
NO_REFERENCE = PositionKind.NO_REFERENCE
MALFORMED_DUMP = PositionKind.MALFORMED_DUMP
# Kinds that say the dump cannot decide (verdict "unchecked"), not that positions are wrong.
UNCHECKED_KINDS = frozenset({NO_DUMPS, NO_REFERENCE, RUN_COUNT})

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
    ROW_INFLATION: (
        "a prefill chunk ended inside an image: Omni::embedding inserts the whole image at the "
        "chunk's first pad token, so the chunk is forwarded as more rows than it has tokens and "
        "every later row is off; split the prompt by token ids so no chunk ends inside an image "
        "(docs/posdbg.md#row-inflation)"
    ),
    NO_REFERENCE: (
        "print the full [POSDBG] form (MNN_POSDBG=full) and keep every image of the prompt inside "
        "the first prefill call, or give the image grids"
    ),
}


def position_finding(kind: PositionKind, message: str, *, run: int = 0, chunk: int | None = None,
                     decode_step: int | None = None, all_seq_len: int | None = None, seq_len: int | None = None,
                     axis: int | None = None, index: int | None = None, expected: object = None,
                     got: object = None, line_no: int | None = None) -> Finding:
    """A position finding (harness/findings.py): where in the dump (run, chunk or decode step,
    axis, token index, log line), expected vs what the runtime used, and the kind's hint."""
    where = Where(run=run, chunk=chunk, decode_step=decode_step, all_seq_len=all_seq_len, seq_len=seq_len,
                  axis=axis, index=index, line_no=line_no)
    return Finding(kind, message, where=where, expected=expected, found=got, hint=_HINTS.get(kind, ""))


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


def _first_diff(got_rows: Sequence[tuple[int, int, int]], want_rows: Sequence[tuple[int, int, int]],
                count: int) -> tuple[int, int] | None:
    for i in range(count):
        for k in range(3):
            if got_rows[i][k] != want_rows[i][k]:
                return i, k
    return None


AxisSummaries = tuple[dict[str, int], dict[str, int], dict[str, int]]  # PosDump.summary: one per axis


def _summary_problem(summary: AxisSummaries, want: Sequence[tuple[int, int, int]], real: int, seq_len: int
                     ) -> tuple[int, str, str] | None:
    """(axis, key, what) of the first summary value the real rows contradict, else None.

    The summary covers every row, padding included, and a padding row may hold anything
    (docs/posdbg.md#the-posdbg-line): over real rows only, every key is compared; with padding,
    `first` is compared exactly, `min` must not exceed the real rows' minimum and `max` not fall
    below their maximum; `sum` and `last` cannot be checked."""
    padded = real < seq_len
    for k in range(3):
        ws = summarize_axis([r[k] for r in want[:real]])
        if not ws:
            continue
        for key, got in summary[k].items():
            exp = ws.get(key)
            if exp is None:
                continue
            if not padded and got != exp:
                return k, key, f"expected {exp}, got {got}"
            if padded and key == "first" and got != exp:
                return k, key, f"expected {exp}, got {got}"
            if padded and key == "min" and got > exp:
                return k, key, f"expected at most {exp} (the real rows' minimum), got {got}"
            if padded and key == "max" and got < exp:
                return k, key, f"expected at least {exp} (the real rows' maximum), got {got}"
    return None


def check_positions(
    dumps: Sequence[PosDump],
    reference: Positions | Sequence[Positions],
    *,
    log: str = "",
) -> list[Finding]:
    """Compare every dumped forward call with the reference. Empty list = all chunks correct.
    Start-up warm-up lines are not a prompt; `log` (the run's stdout) lends the evidence of a
    shape error for row inflation (`calls.account_rows`)."""
    runs = split_runs(dumps)
    if not runs:
        return [position_finding(NO_DUMPS, "expected position dumps of a prompt, found none"
                                + (f" ({len(dumps)} start-up warm-up line(s) only)" if dumps else ""))]
    if isinstance(reference, Positions):
        refs = [reference] * len(runs)
    else:
        refs = list(reference)
        if len(refs) != len(runs):
            return [
                position_finding(
                    RUN_COUNT, f"{len(runs)} prompt runs in the dump but {len(refs)} references given"
                )
            ]
    findings: list[Finding] = []
    for run_idx, (run, ref) in enumerate(zip(runs, refs)):
        findings.extend(check_run(run_idx, run, ref, log if len(runs) == 1 else ""))
    return findings


def _where(run_idx: int, c: Call) -> dict[str, Any]:
    d = c.dump
    return {"run": run_idx, "chunk": c.chunk, "decode_step": c.step, "all_seq_len": d.all_seq_len,
            "seq_len": d.seq_len, "line_no": d.line_no}


def _inflation_finding(run_idx: int, rows: RunRows, ref: Positions | None, first: PosDump) -> Finding:
    n = rows.prompt_len
    prefill = [c for c in rows.calls if not c.decode]
    block = max(c.dump.seq_len for c in prefill)
    where = ""
    if ref is not None:
        image = image_spans(ref)
        inside = [b for b in range(block, n, block) if any(s < b <= e for s, e in image)]
        if inside:
            span = next(f"{s}..{e}" for s, e in image if s < inside[0] <= e)
            where = f"; the chunk boundary at token {inside[0]} falls inside the image block at tokens {span}"
    elif first.axes is not None:
        t = first.axes[0]
        last = min(len(t), first.list_size or len(t)) - 1
        start = next((i for i in range(last) if t[i + 1] == t[i]), None)
        if start is not None and all(t[j] == t[start] for j in range(start, last + 1)):
            where = (f"; the first call ends inside an image (its pad tokens start at token {start} "
                     f"and run to the call's last row {last})")
    if rows.inflated_rows is not None:
        c = next(c for c in prefill if c.chunk == rows.inflated_call)
        return position_finding(
            ROW_INFLATION,
            f"the call's embedding held {rows.inflated_rows} rows for a chunk of at most "
            f"{c.dump.seq_len} tokens (shape error 'dim1 = {rows.inflated_rows}, dim2 = "
            f"{c.dump.seq_len}'){where}", expected=c.dump.seq_len, got=rows.inflated_rows,
            **_where(run_idx, c))
    first_short = next((c for c in prefill if c.real < c.dump.seq_len and c is not prefill[-1]), None)
    c = first_short or prefill[0]
    return position_finding(
        ROW_INFLATION,
        f"the prefill forwarded {rows.prefill_rows} rows for a prompt of {n} tokens "
        f"({(rows.prefill_rows or 0) - n} extra"
        + (f"; the first token chunk of {block} tokens was forwarded as {c.dump.all_seq_len + c.real} rows"
           if first_short is not None else "") + f"){where}",
        expected=n, got=rows.prefill_rows, **_where(run_idx, c))


def check_run(run_idx: int, run: Sequence[PosDump], ref: Positions | None, log: str = "", *,
              prompt_len: int | None = None) -> list[Finding]:
    """One prompt run's findings. Without a reference (`ref` None; `prompt_len`, else the
    run's listSize, gives the token count) only what needs no position value is judged: row
    inflation and rows past the list."""
    findings: list[Finding] = []
    n = ref.prompt_len if ref is not None else (prompt_len or run[0].list_size or 0)
    rows = account_rows(run, n, log)
    reported_length = False
    top = max(max(ref.t), max(ref.h), max(ref.w)) if ref is not None and n else -1
    if rows.inflated:
        findings.append(_inflation_finding(run_idx, rows, ref, run[0]))
    for c in rows.calls:
        d = c.dump
        list_size = d.list_size if d.list_size is not None else n
        if d.list_size is not None and d.list_size > n and not reported_length:
            reported_length = True
            findings.append(position_finding(
                LENGTH_MISMATCH, f"runtime listSize={d.list_size} but the reference prompt has {n} tokens",
                expected=n, got=d.list_size, **_where(run_idx, c)))
        findings += _call_findings(run_idx, c, rows, ref, n, list_size, top)
    return findings


def _call_findings(run_idx: int, c: Call, rows: RunRows, ref: Positions | None, n: int, list_size: int,
                   top: int) -> list[Finding]:
    """One forward call: its real rows past the runtime's list, then its positions (rows, or
    the summary) against the reference's slice. A decode step continues after the prompt's
    largest position (rope_delta), docs/posdbg.md#decode-positions."""
    d = c.dump
    base = _where(run_idx, c)
    out: list[Finding] = []
    if c.decode:
        if ref is None:
            return out
        pos = top + 1 + (c.step or 0)
        want = [(pos, pos, pos)] * d.seq_len
        real = in_list = d.seq_len
    else:
        real = c.real
        in_list = max(0, min(real, list_size - d.all_seq_len))
        if in_list < real:
            out.append(_past_end_finding(c, ref, n, list_size, in_list, base))
        if rows.inflated or ref is None:
            return out  # rows no longer map to tokens, or no values to compare with
        want = ref.rows(d.all_seq_len, d.all_seq_len + in_list)
    if d.axes is not None:
        found = _rows_finding(c, ref, want, in_list, list_size, base)
    elif in_list == real and d.summary is not None:  # past-end rows cannot be compared row-wise
        found = _summary_finding(c, ref, want, in_list, list_size, base)
    else:
        found = None
    return out + ([found] if found is not None else [])


def _past_end_finding(c: Call, ref: Positions | None, n: int, list_size: int, in_list: int,
                      base: dict[str, Any]) -> Finding:
    d = c.dump
    first = d.all_seq_len + in_list
    exp = ref.row(first) if ref is not None and first < n else None
    dumped = tuple(d.axes[k][in_list] for k in range(3)) if d.axes is not None else None
    return position_finding(
        PAST_END,
        f"real rows {first}..{d.all_seq_len + c.real - 1} lie past the runtime's position "
        f"list (listSize={list_size}, prompt has {n} tokens)"
        + (f"; token {first}: expected {exp}" if exp is not None else " and match no prompt token")
        + (f", got {dumped}" if dumped else ""),
        index=first, expected=exp, got=dumped, **base)


def _mismatch_kind(c: Call, chunk_local_matches: bool) -> PositionKind:
    if c.decode:
        return DECODE_MISMATCH
    return CHUNK_LOCAL_BUG if chunk_local_matches else MISMATCH


def _rows_finding(c: Call, ref: Positions, want: Sequence[tuple[int, int, int]], in_list: int, list_size: int,
                  base: dict[str, Any]) -> Finding | None:
    """The first row whose position differs from the reference's, named by its known shape."""
    d = c.dump
    assert d.axes is not None
    got = list(zip(*d.axes))
    diff = _first_diff(got, want, in_list)
    if diff is None:
        return None
    i, k = diff
    idx = d.all_seq_len + i
    kind = _mismatch_kind(c, not c.decode and _first_diff(got, _chunk_local_rows(ref, d, list_size), in_list) is None)
    return position_finding(
        kind, f"axis {k} ({AXIS_NAMES[k]}) first differs at token {idx} (row {i} of the call): "
              f"expected {want[i][k]}, got {got[i][k]}",
        axis=k, index=idx, expected=want[i][k], got=got[i][k], **base)


def _summary_finding(c: Call, ref: Positions, want: Sequence[tuple[int, int, int]], in_list: int, list_size: int,
                     base: dict[str, Any]) -> Finding | None:
    """The summary form's first value the real rows contradict, named by its known shape."""
    d = c.dump
    assert d.summary is not None
    problem = _summary_problem(d.summary, want, in_list, d.seq_len)
    if problem is None:
        return None
    k, key, what = problem
    local = not c.decode and _summary_problem(d.summary, _chunk_local_rows(ref, d, list_size), in_list,
                                              d.seq_len) is None
    return position_finding(
        _mismatch_kind(c, local),
        f"axis {k} ({AXIS_NAMES[k]}) summary {key}: {what} "
        f"(summary form: the first differing token cannot be located; print the full form)",
        axis=k, **base)


def check_position_log(
    text: str, reference: Positions | Sequence[Positions]
) -> list[Finding]:
    """Parse `[POSDBG]` lines from a runtime log and check them (see `check_positions`)."""
    return check_positions(parse_posdbg(text), reference, log=text)


def assert_positions_ok(findings: Iterable[Finding]) -> None:
    """Raise AssertionError listing every finding (which chunk, axis, index, expected vs got)."""
    findings = list(findings)
    if not findings:
        return
    kinds = sorted({f.kind for f in findings})
    lines = [f"mRoPE position check failed: {len(findings)} finding(s) ({', '.join(kinds)})"]
    lines += ["  " + f.explain(with_hint=False) for f in findings]
    hints = {f.kind: f.hint for f in findings if f.hint}
    lines += [f"what to do ({kind}): {hints[kind]}" for kind in kinds if kind in hints]
    raise AssertionError("\n".join(lines))
