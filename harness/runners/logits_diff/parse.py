"""Parsing a captured `llm_logits_diff` run: every row, both summary lines and the tool's
error lines (row and summary formats: docs/logits-diff.md)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from harness.catalogue import Entry, Scope, load_catalogue
from harness.runners.diff_tools import without_engine_text

# printf formats of llm_logits_diff.cpp (MNN master 4d40bdbd, docs/logits-diff.md):
#   "%4d | %6d %6d %s | %7.4f %7.4f | %9.5f %11.7f | %s"
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+|nan|inf|infinity)(?:[eE][-+]?\d+)?"
_ROW = re.compile(rf"^\s*(\d+) \|\s*(-?\d+)\s+(-?\d+)\s+(==|DIFF) \|\s*({_NUM})\s+({_NUM}) \|"
                  rf"\s*({_NUM})\s+({_NUM}) \|(?: (.*))?$", re.I)
_HEADER = re.compile(r"^step \| tokA\(argmaxA\) tokB\(argmaxB\) agree \|")
_PROMPT = re.compile(r"^prompt tokens: (\d+), max new tokens: (\d+)")
_SUMMARY = re.compile(rf"^summary: argmax disagreements=(\d+), first at step (-?\d+), worst maxAbsDiff=({_NUM})",
                      re.I)
_DIST = re.compile(rf"^distribution: mean KL\(A\|\|B\)=({_NUM}), teacher-forced mean NLL A=({_NUM}) "
                   rf"B=({_NUM})", re.I)
_STOP = re.compile(r"^stop token at step (\d+)")
# Lines that mean B (or A) gave no usable logits at a step: the comparison stopped there.
_TOOL_ERROR = re.compile(r"^(?:forward returned null|invalid vocab dim -?\d+|readMap returned null) at step (\d+)")


@lru_cache(maxsize=1)
def _fatal_lines() -> tuple[Entry, ...]:
    """The tool's own fatal lines, and MNN's error line before `load failed` (the catalogue's scope logits-diff)."""
    return load_catalogue().in_scope(Scope.LOGITS_DIFF)


def _fatal(line: str) -> bool:
    return any(e.regex.search(line) for e in _fatal_lines())


def _float(text: str) -> float:
    t = text.strip().lower()
    if t.lstrip("+-") == "nan":
        return math.nan
    return float(t)


def json_number(x: float | None) -> float | None:
    """A float for strict JSON (no NaN/Infinity): rounded, or None when not finite."""
    return round(x, 6) if isinstance(x, (int, float)) and math.isfinite(x) else None


@dataclass(frozen=True)
class Step:
    index: int
    tok_a: int  # A's argmax (the token that drives both models)
    tok_b: int  # B's argmax
    agree: bool
    margin_a: float  # top-1 minus top-2 logit of A
    margin_b: float
    max_abs_diff: float
    mean_abs_diff: float
    text: str  # A's token as text

    def to_json(self) -> dict[str, object]:
        return {"step": self.index, "tok_a": self.tok_a, "tok_b": self.tok_b, "agree": self.agree,
                "margin_a": json_number(self.margin_a), "margin_b": json_number(self.margin_b),
                "max_abs_diff": json_number(self.max_abs_diff), "mean_abs_diff": json_number(self.mean_abs_diff),
                "text": self.text}


@dataclass
class ParsedDiff:
    steps: list[Step] = field(default_factory=list)
    prompt_tokens: int | None = None
    max_new_tokens: int | None = None
    disagreements: int | None = None  # as the summary line says (all steps, step 0 included)
    first_at: int | None = None  # summary's "first at step" (-1 = none)
    worst_max_abs_diff: float | None = None
    mean_kl: float | None = None
    nll_a: float | None = None
    nll_b: float | None = None
    stop_step: int | None = None
    tool_errors: list[str] = field(default_factory=list)  # forward returned null at step N, ...
    fatal: list[str] = field(default_factory=list)  # usage / load errors
    has_header: bool = False

    @property
    def has_summary(self) -> bool:
        return self.disagreements is not None

    @property
    def has_distribution(self) -> bool:
        return self.mean_kl is not None


def parse(stdout: str) -> ParsedDiff:
    """Every row, both summary lines and the tool's error lines of one captured run.
    A row's text may itself hold a newline: lines that are no known line continue it."""
    out = ParsedDiff()
    pending: list[str] = []

    def flush_pending(final: bool) -> None:
        nonlocal pending
        lines = pending
        if final and lines and lines[-1] == "":
            lines = lines[:-1]  # the blank line the tool prints before the summary
        if out.steps and lines:
            last = out.steps[-1]
            out.steps[-1] = Step(last.index, last.tok_a, last.tok_b, last.agree, last.margin_a, last.margin_b,
                                 last.max_abs_diff, last.mean_abs_diff, "\n".join([last.text, *lines]))
        pending = []

    in_rows = False
    for raw in stdout.splitlines():
        if (line := without_engine_text(raw)) is None:
            continue  # the engine's own lines ([POSDBG], shape errors) are never token text
        if m := _ROW.match(line):
            flush_pending(False)
            out.steps.append(Step(int(m[1]), int(m[2]), int(m[3]), m[4] == "==", _float(m[5]), _float(m[6]),
                                  _float(m[7]), _float(m[8]), m[9] or ""))
            in_rows = True
            continue
        known = True
        if m := _PROMPT.match(line):
            out.prompt_tokens, out.max_new_tokens = int(m[1]), int(m[2])
        elif _HEADER.match(line):
            out.has_header = True
        elif m := _SUMMARY.match(line):
            out.disagreements, out.first_at, out.worst_max_abs_diff = int(m[1]), int(m[2]), _float(m[3])
        elif m := _DIST.match(line):
            out.mean_kl, out.nll_a, out.nll_b = _float(m[1]), _float(m[2]), _float(m[3])
        elif m := _STOP.match(line):
            out.stop_step = int(m[1])
        elif _TOOL_ERROR.match(line):
            out.tool_errors.append(line.strip())
        elif _fatal(line):
            out.fatal.append(line.strip())
        else:
            known = False
        if known:
            flush_pending(True)
            in_rows = in_rows and not line.startswith(("summary:", "distribution:"))
        elif in_rows:
            pending.append(line)
    flush_pending(True)
    return out


def add_stderr(parsed: ParsedDiff, stderr: str) -> None:
    """Add the tool's error lines found in stderr (MNN_ERROR lines land there on some builds)."""
    for line in stderr.splitlines():
        if _TOOL_ERROR.match(line):
            parsed.tool_errors.append(line.strip())
        elif _fatal(line):
            parsed.fatal.append(line.strip())
