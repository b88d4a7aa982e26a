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

from harness.checks.mrope.calls import Call, RunRows, account_rows, split_runs
from harness.checks.mrope.posdbg import PosDump, parse_posdbg, summarize_axis
from harness.checks.mrope.reference import AXIS_NAMES, Positions, image_spans

# Finding kinds
OK = "ok"
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


def _first_diff(got_rows, want_rows, count) -> tuple[int, int] | None:
    for i in range(count):
        for k in range(3):
            if got_rows[i][k] != want_rows[i][k]:
                return i, k
    return None


def _summary_problem(summary, want: Sequence[tuple[int, int, int]], real: int, seq_len: int
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
) -> list[PositionFinding]:
    """Compare every dumped forward call with the reference. Empty list = all chunks correct.
    Start-up warm-up lines are not a prompt; `log` (the run's stdout) lends the evidence of a
    shape error for row inflation (`calls.account_rows`)."""
    runs = split_runs(dumps)
    if not runs:
        return [PositionFinding(NO_DUMPS, "expected position dumps of a prompt, found none"
                                + (f" ({len(dumps)} start-up warm-up line(s) only)" if dumps else ""))]
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
        findings.extend(check_run(run_idx, run, ref, log if len(runs) == 1 else ""))
    return findings


def _where(run_idx: int, c: Call) -> dict[str, Any]:
    d = c.dump
    return {"run": run_idx, "chunk": c.chunk, "decode_step": c.step, "all_seq_len": d.all_seq_len,
            "seq_len": d.seq_len, "line_no": d.line_no}


def _inflation_finding(run_idx: int, rows: RunRows, ref: Positions | None, first: PosDump) -> PositionFinding:
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
        return PositionFinding(
            ROW_INFLATION,
            f"the call's embedding held {rows.inflated_rows} rows for a chunk of at most "
            f"{c.dump.seq_len} tokens (shape error 'dim1 = {rows.inflated_rows}, dim2 = "
            f"{c.dump.seq_len}'){where}", expected=c.dump.seq_len, got=rows.inflated_rows,
            **_where(run_idx, c))
    first_short = next((c for c in prefill if c.real < c.dump.seq_len and c is not prefill[-1]), None)
    c = first_short or prefill[0]
    return PositionFinding(
        ROW_INFLATION,
        f"the prefill forwarded {rows.prefill_rows} rows for a prompt of {n} tokens "
        f"({(rows.prefill_rows or 0) - n} extra"
        + (f"; the first token chunk of {block} tokens was forwarded as {c.dump.all_seq_len + c.real} rows"
           if first_short is not None else "") + f"){where}",
        expected=n, got=rows.prefill_rows, **_where(run_idx, c))


def check_run(run_idx: int, run: Sequence[PosDump], ref: Positions | None, log: str = "", *,
              prompt_len: int | None = None) -> list[PositionFinding]:
    """One prompt run's findings. Without a reference (`ref` None; `prompt_len`, else the
    run's listSize, gives the token count) only what needs no position value is judged: row
    inflation and rows past the list."""
    findings: list[PositionFinding] = []
    n = ref.prompt_len if ref is not None else (prompt_len or run[0].list_size or 0)
    rows = account_rows(run, n, log)
    reported_length = False
    top = max(max(ref.t), max(ref.h), max(ref.w)) if ref is not None and n else -1
    if rows.inflated:
        findings.append(_inflation_finding(run_idx, rows, ref, run[0]))
    for c in rows.calls:
        d = c.dump
        base = _where(run_idx, c)
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
        if c.decode:
            if ref is None:
                continue
            # Decode step s continues after the prompt's largest position (rope_delta),
            # docs/posdbg.md#decode-positions.
            pos = top + 1 + (c.step or 0)
            want = [(pos, pos, pos)] * d.seq_len
            real = in_list = d.seq_len
        else:
            real = c.real
            in_list = max(0, min(real, list_size - d.all_seq_len))
            if in_list < real:
                first = d.all_seq_len + in_list
                exp = ref.row(first) if ref is not None and first < n else None
                dumped = tuple(d.axes[k][in_list] for k in range(3)) if d.axes is not None else None
                findings.append(
                    PositionFinding(
                        PAST_END,
                        f"real rows {first}..{d.all_seq_len + real - 1} lie past the runtime's position "
                        f"list (listSize={list_size}, prompt has {n} tokens)"
                        + (f"; token {first}: expected {exp}" if exp is not None else
                           " and match no prompt token") + (f", got {dumped}" if dumped else ""),
                        index=first, expected=exp, got=dumped, **base,
                    )
                )
            if rows.inflated or ref is None:
                continue  # rows no longer map to tokens, or no values to compare with
            want = ref.rows(d.all_seq_len, d.all_seq_len + in_list)
        if d.axes is not None:
            got = list(zip(*d.axes))
            diff = _first_diff(got, want, in_list)
            if diff is None:
                continue
            i, k = diff
            idx = d.all_seq_len + i
            if c.decode:
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
        elif in_list == real and d.summary is not None:  # past-end rows cannot be compared row-wise
            problem = _summary_problem(d.summary, want, in_list, d.seq_len)
            if problem is None:
                continue
            k, key, what = problem
            if c.decode:
                kind = DECODE_MISMATCH
            elif _summary_problem(d.summary, _chunk_local_rows(ref, d, list_size), in_list, d.seq_len) is None:
                kind = CHUNK_LOCAL_BUG
            else:
                kind = MISMATCH
            findings.append(
                PositionFinding(
                    kind,
                    f"axis {k} ({AXIS_NAMES[k]}) summary {key}: {what} "
                    f"(summary form: the first differing token cannot be located; print the full form)",
                    axis=k, **base,
                )
            )
    return findings


def check_position_log(
    text: str, reference: Positions | Sequence[Positions]
) -> list[PositionFinding]:
    """Parse `[POSDBG]` lines from a runtime log and check them (see `check_positions`)."""
    return check_positions(parse_posdbg(text), reference, log=text)


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
