"""`[POSDBG]` position dumps: one line per forward call of an instrumented runtime.

`format_posdbg` writes a line, `parse_posdbg` reads every line of a log into `PosDump`s. The
format (full and summary forms, padding rows, what may precede the tag) is written down in
docs/posdbg.md#the-posdbg-line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import HarnessError

POSDBG_TAG = "[POSDBG]"
SUMMARY_KEYS = ("first", "min", "max", "sum", "last")

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


def summarize_axis(values: Sequence[int]) -> dict[str, int]:
    """The summary form's keys over one axis (padding rows included); {} for no rows."""
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
    """One `[POSDBG]` line as an instrumented runtime prints it (docs/posdbg.md#the-posdbg-line)."""
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
            s = summarize_axis(list(axes[k]))
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
                f"dump to the format documented in docs/posdbg.md."
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
