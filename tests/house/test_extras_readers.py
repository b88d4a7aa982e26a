"""A record's `extras` is touched in harness/report/ alone (issues 35 and 43): what the checks,
runners and the lab measured or stamped is a typed family (harness.evidence, `rec.put`); what is
left is a closed list of free-form details, each with its reason (harness/report/details.py),
written through `rec.keep(Detail.X, value)`. Outside harness/report/ no code reads or writes
`x.extras`, nor hands a record `extras=`."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("harness", "suites", "tools", "virtual_lab")
REPORT = REPO / "harness" / "report"


def _touches(tree: ast.AST) -> list[int]:
    """Lines where `x.extras` is read or written, or a call is given `extras=`."""
    found = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "extras"]
    found += [node.value.lineno for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "extras"]
    return sorted(found)


def test_no_extras_outside_the_report() -> None:
    found = [f"{p.relative_to(REPO)}:{line}" for folder in FOLDERS for p in sorted((REPO / folder).rglob("*.py"))
             if REPORT not in p.parents for line in _touches(ast.parse(p.read_text(encoding="utf-8")))]
    assert not found, ("a report shows a typed family (harness.evidence, rec.put); anything else is "
                       "rec.keep(Detail.X, ...) (harness/report/details.py, with its reason):\n" + "\n".join(found))


def test_the_finder_sees_reads_and_writes() -> None:
    """Not vacuous: every kind of touch is found; a record's own method (`keep`) is not."""
    touches = ('a = rec.extras.get("timing")\nrec.extras["k"] = 1\nrec.extras.update(a=1)\n'
               'rec = TestRecord(extras={"k": 1})\nfor k in rec.extras: pass\n')
    assert _touches(ast.parse(touches)) == [1, 2, 3, 4, 5]
    assert _touches(ast.parse('rec.keep(Detail.FACTS, {})\nrec.put(ev)\n')) == []


def test_the_details_left_are_closed_and_give_their_reason() -> None:
    from harness.evidence import KINDS
    from harness.report import Detail

    text = (REPORT / "details.py").read_text(encoding="utf-8")
    assert not set(Detail) & set(KINDS), "a typed family's key is no free-form detail"
    for member in Detail:
        line = next(ln for ln in text.splitlines() if f'= "{member.value}"' in ln)
        assert "#" in line, f"{member.name}: say why it is free-form"
