"""A record's `extras` is read in harness/report/ alone (issue 35): what the checks, runners and
the lab measured or stamped is read through its typed family (harness.evidence) everywhere
else; code elsewhere may write free-form detail into `extras`, never read it back."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("harness", "suites", "tools", "virtual_lab")
REPORT = REPO / "harness" / "report"
READS = {"get", "items", "keys", "values", "copy", "__getitem__", "__contains__"}


def _is_extras(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "extras" and isinstance(node.ctx, ast.Load)


def _reads(tree: ast.AST) -> list[int]:
    """Lines where an `x.extras` is read: subscripted for a value, asked for a key, iterated,
    copied or passed on whole (writes: item assignment, update, setdefault, pop)."""
    found = []
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _is_extras(node):
            continue
        up = parents.get(node)
        if isinstance(up, ast.Subscript) and up.value is node:
            if isinstance(up.ctx, ast.Load):
                found.append(node.lineno)
        elif isinstance(up, ast.Attribute) and up.value is node:
            if up.attr in READS:
                found.append(node.lineno)
        elif isinstance(up, (ast.Compare, ast.Call, ast.For, ast.comprehension, ast.Starred, ast.keyword, ast.Dict,
                             ast.Return, ast.Assign)):
            found.append(node.lineno)
    return sorted(found)


def test_no_extras_read_outside_the_report() -> None:
    found = [f"{p.relative_to(REPO)}:{line}" for folder in FOLDERS for p in sorted((REPO / folder).rglob("*.py"))
             if REPORT not in p.parents for line in _reads(ast.parse(p.read_text(encoding="utf-8")))]
    assert not found, "read a record's evidence through its family (harness.evidence), not its extras:\n" + \
        "\n".join(found)


def test_the_finder_sees_reads_and_passes_writes() -> None:
    """Not vacuous: the reads this house forbids are found, the writes it allows are not."""
    reads = ('a = rec.extras.get("timing")\nb = rec.extras["etdump"]\nc = "x" in rec.extras\n'
             'd = dict(rec.extras)\nfor k in rec.extras: pass\ne = {**rec.extras}\n')
    assert _reads(ast.parse(reads)) == [1, 2, 3, 4, 5, 6]
    writes = ('rec.extras["k"] = 1\nrec.extras.update(a=1)\nrec.extras.setdefault("k", 1)\nrec.extras.pop("k", None)\n'
              'rec = TestRecord(extras={"k": 1})\n')
    assert _reads(ast.parse(writes)) == []
