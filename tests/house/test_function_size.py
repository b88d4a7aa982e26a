"""Functions held to a size: no function in `harness/` is over 80 lines, counted from its `def`
line to its last line (decorators aside, its docstring, comments and nested functions in).
A long function is split by job, never folded onto fewer lines or stripped of its comments.

ALLOWED lists the functions still over the line, each at the length it has today. It may only
shrink: an entry whose function is gone or back under the line fails until it is removed, and
a listed function may not grow. Its five entries are helper "typed"'s (issue 27 items 1 and
6: coherence's rules and measure, mRoPE's check_run, quant's analyze, the static shape
check), removed as each is split."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
LIMIT = 80

ALLOWED: dict[str, int] = {}  # typed's five are split (issue 27 item 6): none left


def function_lengths(root: Path = HARNESS) -> Iterator[tuple[str, int]]:
    """("path::Qual.name", lines) of every function and method under `root`."""
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        yield from _walk(tree, rel, "")


def _walk(node: ast.AST, rel: str, prefix: str) -> Iterator[tuple[str, int]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{child.name}"
            assert child.end_lineno is not None
            yield f"{rel}::{name}", child.end_lineno - child.lineno + 1
            yield from _walk(child, rel, f"{name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, rel, f"{prefix}{child.name}.")
        else:
            yield from _walk(child, rel, prefix)


def test_no_function_in_harness_is_over_the_limit() -> None:
    over = [f"{name}: {n} lines" for name, n in function_lengths() if n > LIMIT and name not in ALLOWED]
    assert not over, f"functions over {LIMIT} lines (split each by job): " + "; ".join(over)


def test_the_allow_list_only_shrinks() -> None:
    lengths = dict(function_lengths())
    stale = [f"{name} (now {lengths[name]} lines)" if name in lengths else f"{name} (gone)"
             for name in ALLOWED if lengths.get(name, 0) <= LIMIT]
    grown = [f"{name}: {lengths[name]} lines, allowed {ALLOWED[name]}"
             for name in ALLOWED if lengths.get(name, 0) > ALLOWED[name]]
    assert not stale, "remove from ALLOWED (no longer over the limit): " + "; ".join(stale)
    assert not grown, "allowed functions may not grow (split them instead): " + "; ".join(grown)


def test_the_count_is_def_to_last_line() -> None:
    """The rule measures what it says: a def of three lines is three, a nested one counts too."""
    tree = ast.parse("@deco\ndef f(x):\n    def g():\n        return 1\n    return g\n\nclass C:\n    def m(self):\n"
                     "        pass\n")
    assert dict(_walk(tree, "t.py", "")) == {"t.py::f": 4, "t.py::f.g": 2, "t.py::C.m": 2}
