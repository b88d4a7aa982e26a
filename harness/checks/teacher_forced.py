"""The teacher-forced lines, per prompt and per export, and an export's teacher-forced verdict
over all its prompts (docs/logits-diff.md#where-the-thresholds-come-from).

Per prompt, `judge_prompt` calls one comparison agree, drift or disagree on the `Thresholds`
(for both lanes: MNN's llm_logits_diff through harness.runners.logits_diff, the ExecuTorch float
reference through checks/float_reference.py). An export's verdict for one backend pair is read from the figures of all
its prompts together: the median and worst mean KL, share of flipped steps and NLL gap. The
median decides: one odd prompt (beyond a line while the median is not) is named, not failed;
a consistent shift (the median beyond a line) is the export's verdict. Greedy runs of one
binary on one export repeat exactly, so the medians of a healthy export do not move from
night to night (the history tracks them: harness/report/history.py).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from harness.evidence import TeacherForced


@dataclass(frozen=True)
class Thresholds:
    """The lines, calibrated on real 16-bit noise (benchmarks/logits_diff_calibration.py,
    docs/logits-diff.md#calibration-on-real-16-bit-noise): SmolLM2-135M with every MLP Mul
    fake-quantized to a range that holds all products (a healthy 16-bit export) against the
    export on the CPU, 36 prompts of our own, greedy, 32 steps."""

    # Per prompt. A healthy 16-bit export flips 0-25 % of the steps (near ties) with mean KL
    # up to 0.105 and NLL gap up to 0.155: none of that is drift.
    drift_kl: float = 0.15
    disagree_kl: float = 1.0
    drift_nll_gap: float = 0.25
    disagree_nll_gap: float = 1.0
    drift_rate: float = 0.34  # share of counted steps whose argmax differs
    disagree_rate: float = 0.5
    # Per export, on the medians over its prompts (healthy medians: KL 0.048, flips 0.12,
    # gap 0.04); disagree uses the per-prompt disagree lines on the medians.
    export_drift_kl: float = 0.1
    export_drift_nll_gap: float = 0.1
    export_drift_rate: float = 0.25


DEFAULT_THRESHOLDS = Thresholds()


def _finite(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


@dataclass(frozen=True)
class PromptFigures:
    """One prompt's comparison, as a record carries it (`DiffResult.record_extras()`)."""

    prompt: str
    verdict: str  # agree | drift | disagree | error
    mean_kl: float | None  # None: not usable (it included an uncounted step) or not printed
    nll_gap: float | None
    flips: int
    counted: int

    @property
    def compared(self) -> bool:
        return self.verdict != "error" and self.counted > 0

    @property
    def flip_share(self) -> float | None:
        return self.flips / self.counted if self.counted else None

    @classmethod
    def of_evidence(cls, tf: TeacherForced, prompt: str = "") -> PromptFigures:
        return cls(prompt, tf.verdict, tf.mean_kl if tf.kl_used else None, tf.nll_gap if tf.kl_used else None,
                   tf.disagreements, tf.counted_steps)


def _median(values: Sequence[float]) -> float | None:
    # The lower middle value for an even count: one odd prompt of two cannot move it.
    return statistics.median_low(values) if values else None


@dataclass(frozen=True)
class ExportFigures:
    """The figures of all prompts of one export and backend pair."""

    prompts: int
    compared: int
    verdicts: Mapping[str, int]
    median_kl: float | None = None
    worst_kl: float | None = None
    median_flip_share: float | None = None
    worst_flip_share: float | None = None
    median_nll_gap: float | None = None
    worst_nll_gap: float | None = None

    @classmethod
    def of(cls, prompts: Sequence[PromptFigures]) -> ExportFigures:
        used = [p for p in prompts if p.compared]
        kls = [p.mean_kl for p in used if p.mean_kl is not None]
        gaps = [p.nll_gap for p in used if p.nll_gap is not None]
        shares = [s for p in used if (s := p.flip_share) is not None]
        return cls(len(prompts), len(used), dict(Counter(p.verdict for p in prompts)),
                   _median(kls), max(kls, default=None), _median(shares), max(shares, default=None),
                   _median(gaps), max(gaps, default=None))

    def to_json(self) -> dict[str, object]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 6)

        return {"prompts": self.prompts, "compared": self.compared, "verdicts": dict(self.verdicts),
                "median_kl": r(self.median_kl), "worst_kl": r(self.worst_kl),
                "median_flip_share": r(self.median_flip_share), "worst_flip_share": r(self.worst_flip_share),
                "median_nll_gap": r(self.median_nll_gap), "worst_nll_gap": r(self.worst_nll_gap)}

    def summary(self) -> str:
        def f(x: float | None, fmt: str = ".3f") -> str:
            return "n/a" if x is None else format(x, fmt)

        return (f"{self.compared}/{self.prompts} prompts compared; mean KL median {f(self.median_kl)} "
                f"(worst {f(self.worst_kl)}), flipped steps median {f(self.median_flip_share, '.0%')} "
                f"(worst {f(self.worst_flip_share, '.0%')}), NLL gap median {f(self.median_nll_gap)} "
                f"(worst {f(self.worst_nll_gap)})")


@dataclass(frozen=True)
class ExportTeacherForced:
    """The teacher-forced verdict of one export and backend pair over all its prompts."""

    verdict: str  # agree | drift | disagree | error
    figures: ExportFigures
    reasons: tuple[str, ...] = ()
    odd_prompts: tuple[str, ...] = field(default=())  # beyond a line alone: named, not failed
    pair: str = ""

    def describe(self) -> str:
        head = f"teacher-forced {self.pair or 'B'} vs the CPU reference over all prompts: {self.verdict}"
        lines = [f"{head} ({self.figures.summary()})", *(f"  {r}" for r in self.reasons)]
        if self.odd_prompts:
            lines.append(f"  odd prompt(s), not a shift: {', '.join(self.odd_prompts)}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {"verdict": self.verdict, "pair": self.pair, "reasons": list(self.reasons),
                "odd_prompts": list(self.odd_prompts), **self.figures.to_json()}


def judge_export(prompts: Sequence[PromptFigures], *, pair: str = "",
                 thresholds: Thresholds = DEFAULT_THRESHOLDS) -> ExportTeacherForced:
    """One export's (and pair's) verdict from the medians of all its prompts' figures."""
    t = thresholds
    fig = ExportFigures.of(prompts)
    if not fig.compared:
        why = f"no prompt was compared ({fig.verdicts.get('error', 0)} of {fig.prompts} comparisons failed)"
        return ExportTeacherForced("error", fig, (why,), pair=pair)
    disagree, drift = [], []
    checks = (("median mean KL", fig.median_kl, t.disagree_kl, t.export_drift_kl),
              ("median NLL gap", fig.median_nll_gap, t.disagree_nll_gap, t.export_drift_nll_gap),
              ("median share of flipped steps", fig.median_flip_share, t.disagree_rate, t.export_drift_rate))
    for name, value, hi, lo in checks:
        if value is None:
            continue
        if value >= hi:
            disagree.append(f"{name} {value:.3f} >= {hi}")
        elif value >= lo:
            drift.append(f"{name} {value:.3f} >= {lo}")
    verdict = "disagree" if disagree else "drift" if drift else "agree"
    odd = tuple(p.prompt or f"#{i + 1}" for i, p in enumerate(prompts)
                if p.compared and _rank(p.verdict) > _rank(verdict))
    errors = fig.verdicts.get("error", 0)
    notes = [f"{errors} of {fig.prompts} comparisons failed (their records say why)"] if errors else []
    return ExportTeacherForced(verdict, fig, tuple(disagree + drift + notes), odd, pair)


@dataclass(frozen=True)
class PromptJudgement:
    """One prompt's verdict on the per-prompt lines, with the lines it crossed."""

    verdict: Literal["agree", "drift", "disagree"]
    disagree: tuple[str, ...] = ()
    drift: tuple[str, ...] = ()

    @property
    def reasons(self) -> tuple[str, ...]:
        return (*self.disagree, *self.drift)


def judge_prompt(mean_kl: float | None, nll_gap: float | None, flips: int, counted: int, *,
                 first_flip: int | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> PromptJudgement:
    """One prompt's verdict from its figures: the share of `counted` steps whose argmax flips,
    the mean KL(A||B) and the NLL gap B - A (None: not usable, not judged on; not finite:
    disagree). Both lanes judge a prompt here: MNN's llm_logits_diff (runners/logits_diff/judge.py)
    and the ExecuTorch float reference (checks/float_reference.py)."""
    if counted <= 0:
        raise ValueError("a prompt's verdict needs at least one counted step")
    t = thresholds
    disagree: list[str] = []
    drift: list[str] = []
    rate = flips / counted
    if rate >= t.disagree_rate:
        disagree.append(f"argmax differs at {flips} of {counted} steps ({rate:.0%} >= {t.disagree_rate:.0%})")
    elif rate >= t.drift_rate:  # a few flips are 16-bit noise at near ties (docs/logits-diff.md)
        first = "" if first_flip is None else f", first at step {first_flip}"
        drift.append(f"argmax differs at {flips} of {counted} steps ({rate:.0%} >= {t.drift_rate:.0%}{first})")
    for value, name, lo, hi in ((mean_kl, "mean KL(A||B)", t.drift_kl, t.disagree_kl),
                                (nll_gap, "NLL gap B-A", t.drift_nll_gap, t.disagree_nll_gap)):
        if value is None:
            continue
        if not math.isfinite(value):
            disagree.append(f"{name} is {value}")
        elif value >= hi:
            disagree.append(f"{name} {value:.4f} >= {hi}")
        elif value >= lo:
            drift.append(f"{name} {value:.4f} >= {lo}")
    verdict: Literal["agree", "drift", "disagree"] = "disagree" if disagree else "drift" if drift else "agree"
    return PromptJudgement(verdict, tuple(disagree), tuple(drift))


def _rank(verdict: str) -> int:
    return {"agree": 0, "drift": 1, "disagree": 2}.get(verdict, 0)
