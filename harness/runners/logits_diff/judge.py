"""The verdict of one teacher-forced comparison: error where the run did not give a whole
table, else agree, drift or disagree from the argmax agreement of the counted steps, the mean
KL(A||B) and the NLL gap (B - A), on the per-prompt lines of harness.checks.judge_prompt; where
each threshold comes from: docs/logits-diff.md#where-the-thresholds-come-from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from harness.checks import DEFAULT_THRESHOLDS, Thresholds, judge_prompt
from harness.errors import TransportError
from harness.evidence import TeacherForced
from harness.runners.diff_tools import TOOL
from harness.runners.logits_diff.parse import ParsedDiff, Step, add_stderr, json_number, parse

Agreement = Literal["agree", "drift", "disagree", "error"]
VERDICTS: tuple[str, ...] = ("agree", "drift", "disagree", "error")


@dataclass
class DiffResult:
    """One comparison of B against A and its verdict."""

    parsed: ParsedDiff
    verdict: Agreement
    reasons: list[str]
    excluded_steps: tuple[int, ...] = ()
    exclusion_note: str = ""
    counted_steps: int = 0
    counted_disagreements: int = 0
    first_disagreement: int | None = None  # first counted step whose argmax differs
    kl_used: bool = True  # False: the mean KL/NLL include a step that is not counted
    chunk_a: int | None = None
    chunk_b: int | None = None
    exit_code: int | None = 0
    stderr: str = ""
    stdout: str = ""
    label_a: str = "A"
    label_b: str = "B"
    wall_s: float = 0.0
    transport_error: str | None = None  # the link failed: the comparison may not have run
    fault: TransportError | None = field(default=None, compare=False)  # that link fault, as raised

    @property
    def steps(self) -> list[Step]:
        return self.parsed.steps

    @property
    def nll_gap(self) -> float | None:
        p = self.parsed
        return p.nll_b - p.nll_a if p.nll_a is not None and p.nll_b is not None else None

    def context(self, width: int = 6) -> tuple[str, str, str] | None:
        """A's text before the first disagreeing step, that step's token, and what follows."""
        if self.first_disagreement is None:
            return None
        steps = self.parsed.steps
        i = next(k for k, s in enumerate(steps) if s.index == self.first_disagreement)
        return ("".join(s.text for s in steps[max(0, i - width):i]), steps[i].text,
                "".join(s.text for s in steps[i + 1:i + 1 + width]))

    def describe(self) -> str:
        p = self.parsed
        head = (f"teacher-forced {self.label_b} vs {self.label_a}: {self.verdict} "
                f"({self.counted_disagreements}/{self.counted_steps} steps disagree")
        if p.mean_kl is not None:
            head += f", mean KL {p.mean_kl:.4f}, NLL {p.nll_a:.4f} -> {p.nll_b:.4f}"
        lines = [head + ")"]
        lines += [f"  {r}" for r in self.reasons]
        ctx = self.context()
        if ctx is not None:
            s = next(s for s in p.steps if s.index == self.first_disagreement)
            lines.append(f"  first disagreement at step {s.index}: {ctx[0]!r} [{ctx[1]!r}] {ctx[2]!r} "
                         f"(A token {s.tok_a}, B argmax {s.tok_b}, maxAbsDiff {s.max_abs_diff:.3f})")
        if self.exclusion_note:
            lines.append(f"  note: {self.exclusion_note}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        p = self.parsed
        ctx = self.context()
        return {
            "verdict": self.verdict, "reasons": self.reasons,
            "steps": len(p.steps), "counted_steps": self.counted_steps,
            "disagreements": self.counted_disagreements,
            "summary_disagreements": p.disagreements,
            "first_disagreement": self.first_disagreement,
            "context": None if ctx is None else {"before": ctx[0], "token": ctx[1], "after": ctx[2]},
            "mean_kl": json_number(p.mean_kl), "nll_a": json_number(p.nll_a), "nll_b": json_number(p.nll_b),
            "nll_gap": json_number(self.nll_gap), "kl_used": self.kl_used,
            "worst_max_abs_diff": json_number(p.worst_max_abs_diff),
            "excluded_steps": list(self.excluded_steps), "exclusion_note": self.exclusion_note or None,
            "chunk_a": self.chunk_a, "chunk_b": self.chunk_b,
            "prompt_tokens": p.prompt_tokens, "stop_step": p.stop_step,
            "tool_errors": p.tool_errors + p.fatal, "exit_code": self.exit_code,
            "transport_error": self.transport_error,
            "rows": [s.to_json() for s in p.steps],
        }

    def evidence(self) -> TeacherForced:
        """What a TestRecord carries, typed (harness.evidence.TeacherForced)."""
        return TeacherForced.of_json(self.record_extras())

    def record_extras(self) -> dict[str, object]:
        """The compact form a TestRecord carries (the rows stay in the run folder / JSON)."""
        d = self.to_json()
        d.pop("rows")
        d["a"], d["b"] = self.label_a, self.label_b
        # Where B departs from A: the rows around the first disagreement, for the HTML report.
        if self.first_disagreement is not None:
            i = next(k for k, s in enumerate(self.parsed.steps) if s.index == self.first_disagreement)
            d["rows_near"] = [s.to_json() for s in self.parsed.steps[max(0, i - 3):i + 4]]
        return d


def chunk_of(config: Mapping[str, object]) -> int | None:
    """The prefill chunk a config runs with: the largest of `chunk_limits` (QNN configs carry
    [chunk, 1]); None = one forward for the whole prompt."""
    cl = config.get("chunk_limits")
    if isinstance(cl, list) and cl and all(isinstance(x, int) and x > 0 for x in cl):
        return int(max(cl))
    return None


def judge(parsed: ParsedDiff, *, chunk_a: int | None = None, chunk_b: int | None = None,
          exit_code: int | None = 0, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> DiffResult:
    """The verdict of one parsed run: an error where the run or its table is incomplete, else the
    per-prompt lines (harness.checks.judge_prompt) on its counted steps. `chunk_a`/`chunk_b`:
    each config's prefill chunk (None = unchunked)."""
    reasons: list[str] = []
    excluded: tuple[int, ...] = ()
    note = ""
    chunks = [c for c in (chunk_a, chunk_b) if c]
    if parsed.prompt_tokens is not None and chunks and parsed.prompt_tokens > min(chunks):
        excluded = (0,)
        note = (f"step 0 not counted: the prompt ({parsed.prompt_tokens} tokens) is longer than a prefill chunk "
                f"(A {chunk_a or 'unchunked'}, B {chunk_b or 'unchunked'}), and MNN's forward() then returns "
                "other logits than the last prompt token's (generation is unaffected); the mean KL/NLL include "
                "that step")
    counted = [s for s in parsed.steps if s.index not in excluded]
    flips = [s for s in counted if not s.agree]
    result = DiffResult(parsed, "error", reasons, excluded, note, len(counted), len(flips),
                        flips[0].index if flips else None, chunk_a=chunk_a, chunk_b=chunk_b, exit_code=exit_code)
    # Mean KL/NLL cover every step; with step 0 excluded they are usable only when every
    # counted step is bit-identical (KL 0, equal NLL there).
    identical_rest = bool(counted) and all(s.max_abs_diff == 0 and s.agree for s in counted)
    result.kl_used = not excluded

    errors = list(parsed.fatal) + list(parsed.tool_errors)
    if errors:
        reasons.append("the tool reported: " + "; ".join(errors[:3]))
    if exit_code not in (0, None):
        reasons.append(f"{TOOL} exited with code {exit_code}")
    if not parsed.steps:
        reasons.append("no step was compared" + ("" if parsed.has_header else " (no row table printed)"))
    elif not counted:
        reasons.append(f"no step left to compare after excluding step(s) {list(excluded)}")
    if not parsed.has_summary:
        reasons.append("no `summary:` line (the run did not finish)")
    elif not parsed.has_distribution:
        reasons.append("no `distribution:` line")
    if reasons:
        return result  # error

    kl = parsed.mean_kl if result.kl_used else (0.0 if identical_rest else None)
    gap = result.nll_gap if result.kl_used else (0.0 if identical_rest else None)
    lines = judge_prompt(kl, gap, len(flips), len(counted), first_flip=flips[0].index if flips else None,
                         thresholds=thresholds)
    if not result.kl_used and not identical_rest:
        reasons.append("mean KL and NLL not used (they include the uncounted step 0); verdict from argmax agreement")
    reasons[:0] = lines.reasons
    result.verdict = lines.verdict
    return result


def analyse(stdout: str, stderr: str = "", *, exit_code: int | None = 0, chunk_a: int | None = None,
            chunk_b: int | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> DiffResult:
    """Parse and judge one captured run (what the CLI and the device runner both use).
    stderr is searched too: MNN_ERROR lines land there on some builds."""
    parsed = parse(stdout)
    add_stderr(parsed, stderr)
    res = judge(parsed, chunk_a=chunk_a, chunk_b=chunk_b, exit_code=exit_code, thresholds=thresholds)
    res.stdout, res.stderr = stdout, stderr
    return res


