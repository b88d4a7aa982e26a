"""Cross-backend agreement: does a backend's answer match the CPU/CPU reference of the same run?

`compare(text, reference)` gives a similarity in [0, 1] and a level:
- `agree`: the same answer (only punctuation, case, function words or a shorter/longer
  tail differ, and the similarity is high);
- `drift`: the same subject but different content, e.g. a content word swapped
  (kitten -> goat) or the continuation going elsewhere: worth a look, not a failure;
- `disagree`: a different answer altogether.

A wrong fluent answer is a finding (`Agreement.wrong_answer`): a drift in which a content
word of the reference was replaced by another ("The capital of France is France" against
"The capital of France is Paris."), whatever words a suite expects. A drift that only adds,
drops or reorders words stays a warning.

`assert_agrees` turns a drift into a `DriftWarning` that carries both texts (so a report
shows them), and a disagreement into an AssertionError (or a warning with on_disagree='warn').

Similarity = mean of (a) the word-sequence match ratio (difflib; order matters) and
(b) the Dice overlap of content stems (order-free: a reworded answer on the same subject).
"""

from __future__ import annotations

import difflib
import unicodedata
import warnings
from dataclasses import dataclass, field
from typing import Literal

import harness.checks.textstats as ts

Level = Literal["agree", "drift", "disagree"]


class DriftWarning(UserWarning):
    """A backend's answer drifted from the CPU/CPU reference. `agreement` holds both texts."""

    def __init__(self, message: str, agreement: Agreement | None = None) -> None:
        super().__init__(message)
        self.agreement = agreement


@dataclass(frozen=True)
class Agreement:
    similarity: float
    level: Level
    text: str
    reference: str
    # First content differences, as (reference words, text words); empty side = missing words.
    changes: tuple[tuple[str, str], ...] = field(default=())
    sequence_ratio: float = 0.0
    content_overlap: float = 0.0

    @property
    def substitutions(self) -> tuple[tuple[str, str], ...]:
        """Changes where the reference said one thing and the text another (both sides present)."""
        return tuple((a, b) for a, b in self.changes if a and b)

    @property
    def wrong_answer(self) -> bool:
        """A fluent drift that replaced content: the backend answered something else."""
        return self.level == "drift" and bool(self.substitutions)

    def describe(self, label: str = "") -> str:
        """Multi-line message with the level, the first differences and both texts."""
        head = f"{label}: " if label else ""
        what = "drift (a wrong answer)" if self.wrong_answer else self.level
        lines = [f"{head}{what} with the CPU/CPU reference (similarity {self.similarity:.2f}: "
                 f"sequence {self.sequence_ratio:.2f}, content {self.content_overlap:.2f})"]
        if self.changes:
            shown = "; ".join(f"{a or '(nothing)'!r} -> {b or '(nothing)'!r}" for a, b in self.changes[:5])
            lines.append(f"  differences: {shown}")
        lines.append(f"  text:      {_flat(self.text)}")
        lines.append(f"  reference: {_flat(self.reference)}")
        return "\n".join(lines)


def _flat(text: str, limit: int = 400) -> str:
    flat = text.replace("\n", "\\n")
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")


def _lex(text: str) -> list[str]:
    """Comparable units: lowercased words, numbers and single CJK characters."""
    norm = unicodedata.normalize("NFKC", text)
    return [u.text for u in ts.units(norm) if u.kind in ("word", "num", "cjk")]


def _is_content(unit: str) -> bool:
    if ts.is_cjk(unit[0]):
        return unit not in ts.CJK_FUNCTION_CHARS
    return ts.content_stem(unit) is not None or unit.isdigit()


def _changes(ref: list[str], txt: list[str]) -> tuple[list[tuple[str, str]], float]:
    """Content-bearing differences between the two unit lists, and the match ratio."""
    sm = difflib.SequenceMatcher(None, ref, txt, autojunk=False)
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        a, b = ref[i1:i2], txt[j1:j2]
        # A text that stops early (or runs longer) than the other is a length difference,
        # not a change of content: both runs are capped at max tokens.
        if op in ("delete", "insert") and i2 == len(ref) and j2 == len(txt):
            continue
        if any(_is_content(u) for u in a + b):
            joiner_a = "" if a and ts.is_cjk(a[0][0]) else " "
            joiner_b = "" if b and ts.is_cjk(b[0][0]) else " "
            out.append((joiner_a.join(a), joiner_b.join(b)))
    return out, sm.ratio()


def compare(text: str, reference: str, *, agree_at: float = 0.85,
            disagree_below: float = 0.25) -> Agreement:
    """Similarity and level of `text` against the CPU/CPU `reference` answer."""
    if not isinstance(text, str) or not isinstance(reference, str):
        raise TypeError("compare(text, reference) needs two strings")
    ref_u, txt_u = _lex(reference), _lex(text)
    if not ref_u and not txt_u:
        return Agreement(1.0, "agree", text, reference, (), 1.0, 1.0)
    changes, seq = _changes(ref_u, txt_u)
    a, b = ts.content_stems(reference), ts.content_stems(text)
    dice = 2 * len(a & b) / (len(a) + len(b)) if (a or b) else 1.0
    sim = 0.5 * seq + 0.5 * dice
    if not changes and sim >= agree_at:
        level: Level = "agree"
    elif not changes and _is_prefix(ref_u, txt_u):
        level = "agree"  # one run stopped earlier; what both said is the same
    elif sim < disagree_below:
        level = "disagree"
    else:
        level = "drift"
    return Agreement(round(sim, 4), level, text, reference, tuple(changes), round(seq, 4), round(dice, 4))


def _is_prefix(a: list[str], b: list[str]) -> bool:
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return bool(short) and long_[:len(short)] == short


def assert_agrees(text: str, reference: str, *, label: str = "",
                  on_disagree: Literal["fail", "warn"] = "fail",
                  agree_at: float = 0.85, disagree_below: float = 0.25) -> Agreement:
    """pytest-facing: silent on agree, DriftWarning on drift, AssertionError on disagree."""
    ag = compare(text, reference, agree_at=agree_at, disagree_below=disagree_below)
    if ag.level == "drift" or (ag.level == "disagree" and on_disagree == "warn"):
        warnings.warn(DriftWarning(ag.describe(label), ag), stacklevel=2)
    elif ag.level == "disagree":
        raise AssertionError(ag.describe(label))
    return ag
