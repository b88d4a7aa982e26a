"""What the forward calls of one `[POSDBG]` dump did: which lines are start-up warm-up, which
calls are prefill and decode, how many of a call's rows were real, and whether the prompt was
forwarded as more rows than it has tokens (docs/posdbg.md#what-the-real-engine-showed).

The positions checker (`positions.py`) compares values; this module only counts rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.catalogue import load_catalogue
from harness.checks.mrope.posdbg import PosDump

# MNN's shape error for a binary op, printed to stdout: the catalogue's line (its two dims as groups).
_BROADCAST = "broadcast-error"


def is_warmup(d: PosDump) -> bool:
    """`llm_demo`'s start-up tuning runs decode-form calls before any prompt:
    `all_seq_len=0 seq_len=1 listSize=0 gen_seq_len=1` (docs/posdbg.md#warm-up-lines)."""
    return d.is_decode and d.all_seq_len == 0 and not d.list_size


def is_decode(d: PosDump, prompt_len: int) -> bool:
    """Decode call: the runtime says so (gen_seq_len > 0); a dump without the field is decode
    when it forwards one row at or past the prompt's end."""
    if d.gen_seq_len is not None:
        return d.gen_seq_len > 0
    return d.seq_len == 1 and d.all_seq_len >= prompt_len


def split_runs(dumps: Sequence[PosDump]) -> list[list[PosDump]]:
    """One list per prompt: a prefill dump at all_seq_len 0 starts a new run. Warm-up lines
    (decode-form calls before any prompt) belong to no run."""
    runs: list[list[PosDump]] = []
    for d in dumps:
        if d.all_seq_len == 0 and not d.is_decode:
            runs.append([])
        elif not runs:
            continue  # start-up warm-up, or a decode line with no prompt before it
        runs[-1].append(d)
    return runs


def warmup_count(dumps: Sequence[PosDump]) -> int:
    """Dump lines before the first prompt (start-up tuning)."""
    n = 0
    for d in dumps:
        if d.all_seq_len == 0 and not d.is_decode:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Call:
    """One forward call of a run: its dump and the rows of it that carried tokens."""

    dump: PosDump
    decode: bool
    real: int  # rows holding real data; the rest (seq_len - real) are padding
    chunk: int | None  # prefill call index within the run; None for decode
    step: int | None  # decode step (0-based); None for prefill


@dataclass(frozen=True)
class RunRows:
    """Row accounting of one prompt run."""

    calls: list[Call]
    prompt_len: int
    prefill_rows: int | None  # rows the prefill forwarded in all; None when the run stopped early
    inflated_rows: int | None = None  # rows one call's embedding held, when a shape error shows it
    inflated_call: int | None = None  # the prefill call whose embedding had `inflated_rows`

    @property
    def inflated(self) -> bool:
        return (self.prefill_rows is not None and self.prefill_rows > self.prompt_len) or (
            self.inflated_rows is not None)


def account_rows(run: Sequence[PosDump], prompt_len: int, log: str = "") -> RunRows:
    """Real rows per call: a prefill call's real rows are the next call's `all_seq_len` minus
    its own (the engine advances by real rows only); the last prefill call's come from the first
    decode call, else the prompt's remaining tokens. `log` (the run's stdout) lends the shape
    error's evidence when the run stopped in prefill: an embedding of `dim1` rows added to a
    call of `dim2 = seq_len` rows, with dim1 > dim2, is a chunk embedded as more rows than it
    has tokens (docs/posdbg.md#row-inflation)."""
    decode_flags = [is_decode(d, prompt_len) for d in run]
    first_decode = next((d.all_seq_len for d, dec in zip(run, decode_flags) if dec), None)
    calls: list[Call] = []
    chunk = step = 0
    prefill_idx = [i for i, dec in enumerate(decode_flags) if not dec]
    for i, (d, dec) in enumerate(zip(run, decode_flags)):
        if dec:
            calls.append(Call(d, True, d.seq_len, None, d.gen_seq_len - 1 if d.gen_seq_len else step))
            step += 1
            continue
        later = [run[j].all_seq_len for j in prefill_idx if j > i]
        nxt = later[0] if later else first_decode
        if nxt is not None and nxt > d.all_seq_len:
            real = min(d.seq_len, nxt - d.all_seq_len)
        else:
            real = max(0, min(d.seq_len, prompt_len - d.all_seq_len))
        calls.append(Call(d, False, real, chunk, None))
        chunk += 1
    prefill = [c for c in calls if not c.decode]
    total = None
    if prefill and first_decode is not None:
        total = first_decode
    inflated_rows = inflated_call = None
    if first_decode is None and prefill:
        last = prefill[-1]
        for m in load_catalogue().entry(_BROADCAST).regex.finditer(log):
            rows, call_rows = int(m.group(1)), int(m.group(2))
            if call_rows == last.dump.seq_len and rows > call_rows:
                inflated_rows, inflated_call = rows, last.chunk
                break
    return RunRows(calls, prompt_len, total, inflated_rows, inflated_call)
