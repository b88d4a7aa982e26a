"""One prompt's teacher-forced verdict is decided in one place, `harness.checks.judge_prompt`,
for both lanes (MNN's llm_logits_diff judge and the ExecuTorch float reference)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from harness.checks import DEFAULT_THRESHOLDS as T
from harness.checks import judge_prompt

REPO = Path(__file__).resolve().parents[2]
HOME = REPO / "harness" / "checks" / "teacher_forced.py"


def test_the_lines() -> None:
    assert judge_prompt(0.0, 0.0, 0, 10).verdict == "agree"
    assert judge_prompt(T.drift_kl, 0.0, 0, 10).verdict == "drift"  # a line is crossed at equality
    assert judge_prompt(T.disagree_kl, 0.0, 0, 10).reasons == (f"mean KL(A||B) {T.disagree_kl:.4f} >= {T.disagree_kl}",)
    assert judge_prompt(None, None, 5, 10).verdict == "disagree"  # 50 % of the steps flip
    drift = judge_prompt(None, None, 4, 10, first_flip=3)
    assert drift.verdict == "drift" and drift.drift == ("argmax differs at 4 of 10 steps (40% >= 34%, first at step 3)",)


def test_unusable_figures_are_not_judged_and_broken_ones_disagree() -> None:
    assert judge_prompt(None, None, 0, 10).verdict == "agree"
    assert judge_prompt(math.nan, 0.0, 0, 10).disagree == ("mean KL(A||B) is nan",)
    assert judge_prompt(0.0, math.inf, 0, 10).verdict == "disagree"
    with pytest.raises(ValueError, match="counted step"):
        judge_prompt(0.0, 0.0, 0, 0)


def test_no_other_module_reads_the_per_prompt_lines() -> None:
    # another object's line read (a record's own measured rate, `self.disagree_rate`, is its data, not a line)
    lines = re.compile(r"(?<!\bself)\.(drift|disagree)_(kl|rate|nll_gap)\b")
    found = [f"{p.relative_to(REPO)}:{n}" for p in sorted((REPO / "harness").rglob("*.py")) if p != HOME
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if lines.search(line)]
    assert not found, f"a prompt's verdict is harness.checks.judge_prompt's: {found}"
