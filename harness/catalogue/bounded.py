"""Bounds on the catalogue's regexes, which every output line of every run meets: a pattern
that nests unbounded repeats (`(a+)+`, `(\\w+\\s?)*`) backtracks exponentially on a line that
almost matches, and one with three unbounded repeats in a row (`.*a.*b.*c`) is cubic: both hang
the reader, so both are refused at load. Each line is read up to MAX_LINE_CHARS (a runner
printing megabytes without a newline would make even a plain `.*x.*y` take minutes). Python's
`re` has no timeout; these bounds are what keeps a reader finite."""

from __future__ import annotations

import re._constants as sre_c
import re._parser as sre_parse
from typing import Any

MAX_LINE_CHARS = 4096  # longer than any known line (QNN's longest, a graph's op list, is ~1 500)
_REPEATS = (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT)
_MOST_IN_SEQUENCE = 2
_BROAD_CATEGORIES = (sre_c.CATEGORY_NOT_SPACE, sre_c.CATEGORY_NOT_DIGIT, sre_c.CATEGORY_NOT_WORD)


def capped(line: str) -> str:
    """The part of an output line the catalogue reads."""
    return line[:MAX_LINE_CHARS]


def unbounded_problem(pattern: str) -> str | None:
    """Why `pattern` could take more than quadratic time on a line, or None: an unbounded repeat
    inside another (exponential; possessive repeats and atomic groups never backtrack), or more
    than two unbounded repeats in one sequence (`.*a.*b.*c`: cubic, minutes on a capped line).
    Conservative: some such patterns are in fact fast."""
    parsed = sre_parse.parse(pattern)
    if _walk(parsed, False):
        return "nests a repeat inside a repeat (as `(a+)+`), which takes exponential time on a line that almost matches"
    if _most_in_sequence(parsed) > _MOST_IN_SEQUENCE:
        return (f"has more than {_MOST_IN_SEQUENCE} unbounded wildcards in a row (as `.*a.*b.*c`), which takes "
                "cubic time on a long line")
    return None


def _broad(items: Any) -> bool:
    """Whether a repeated atom matches almost any character (`.`, `\\S`, `[^x]`): repeats of
    those overlap each other, so the engine tries every split of the line between them."""
    for op, av in items:
        if op in (sre_c.ANY, sre_c.NOT_LITERAL):
            return True
        if op == sre_c.IN and any(o == sre_c.NEGATE or (o == sre_c.CATEGORY and a in _BROAD_CATEGORIES)
                                  for o, a in av):
            return True
    return False


def _most_in_sequence(items: Any) -> int:
    """The most unbounded repeats of broad atoms one path through the pattern meets (branches:
    the worst one)."""
    total = 0
    for op, av in items:
        if op in _REPEATS:
            total += (av[1] == sre_c.MAXREPEAT and _broad(av[2])) + _most_in_sequence(av[2])
        elif op == sre_c.SUBPATTERN:
            total += _most_in_sequence(av[-1])
        elif op == sre_c.BRANCH:
            total += max(_most_in_sequence(b) for b in av[1])
    return total


def _walk(items: Any, inside: bool) -> bool:
    for op, av in items:
        if op in _REPEATS:
            _, hi, sub = av
            unbounded = hi == sre_c.MAXREPEAT
            if unbounded and inside:
                return True
            if _walk(sub, inside or unbounded):
                return True
        elif op == sre_c.SUBPATTERN and _walk(av[-1], inside):
            return True
        elif op == sre_c.BRANCH and any(_walk(b, inside) for b in av[1]):
            return True
        elif op in (sre_c.ASSERT, sre_c.ASSERT_NOT) and _walk(av[1], inside):
            return True
    return False


__all__ = ["MAX_LINE_CHARS", "capped", "unbounded_problem"]
