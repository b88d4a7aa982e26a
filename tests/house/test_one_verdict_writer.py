"""A record's verdict (status, failure class, message, warning) has one writer,
`TestRecord.set_verdict` (harness/report/records.py): assigning a verdict field elsewhere
raises, no other module writes `extras["warning"]`, and no module but the enums' own compares
a status, class or pair with a string literal."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness.outcomes import FailureClass, Status
from harness.report import TestRecord
from harness.verdict import Verdict

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("harness", "suites", "tools")
RECORDS = ROOT / "harness" / "report" / "records.py"
# The enums' own modules spell their strings.
OWN = {ROOT / "harness" / "outcomes.py", ROOT / "harness" / "pairs.py"}


def _sources() -> list[Path]:
    return [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]


def test_a_verdict_field_is_written_by_set_verdict_alone() -> None:
    rec = TestRecord(name="t", suite="s", device="d")
    for field, value in (("status", Status.FAILED), ("failure_class", FailureClass.CRASH), ("message", "m")):
        with pytest.raises(AttributeError, match="set_verdict"):
            setattr(rec, field, value)
    rec.set_verdict(Verdict.failed(FailureClass.CRASH, "exited 139"))
    assert (rec.status, rec.failure_class, rec.message) == (Status.FAILED, FailureClass.CRASH, "exited 139")
    assert rec.is_bad and rec.cause == "crash"


def test_no_module_but_records_writes_a_records_warning() -> None:
    found = []
    for path in _sources():
        if path == RECORDS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Assign):
                continue
            for t in node.targets:
                if isinstance(t, ast.Subscript) and re.search(r"extras\[['\"]warning['\"]\]", ast.unparse(t)):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"extras['warning'] is the verdict's, written by TestRecord.set_verdict: {found}"


# What holds a status, a failure class or a pair (a record's, a classification's, a night's).
TYPED_NAMES = {"status", "failure_class", "backend_pair", "pair", "cls", "outcome"}


def _holds_typed(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in TYPED_NAMES) or \
        (isinstance(node, ast.Name) and node.id in TYPED_NAMES)


def _compared_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants compared (==, !=, in, not in; directly or in a tuple/set/list) with
    something that holds a status, class or pair."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        if not any(_holds_typed(o) for o in operands):
            continue
        for operand in operands:
            items = operand.elts if isinstance(operand, (ast.Tuple, ast.Set, ast.List)) else [operand]
            out += [(node.lineno, i.value) for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return out


def test_no_status_class_or_pair_literal_is_compared_outside_the_enums() -> None:
    found = []
    for path in _sources():
        if path in OWN:
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(ROOT)}:{line}: {value!r}" for line, value in _compared_literals(ast.parse(text))]
    assert not found, "compare with the enum member (Status, FailureClass, BackendPair, NightOutcome):\n" + \
        "\n".join(found)


def test_the_literal_finder_sees_a_compared_status() -> None:
    """Not vacuous: the comparisons this house forbids are found."""
    tree = ast.parse('if rec.status == "failed" or r.failure_class in ("crash", "timeout") or pair == "qnn": pass')
    assert [v for _, v in _compared_literals(tree)] == ["failed", "crash", "timeout", "qnn"]


def test_every_export_failure_is_a_record_class() -> None:
    """The export stage's classes (its own and QNN's as `qnn-<failure>`) are FailureClass members:
    an export's record holds its class typed, and a new QnnFailure needs its spelling there."""
    from harness.lab.exports import ExportFailure
    from harness.qnn import QnnFailure

    named = {e.value for e in ExportFailure} | {f"qnn-{q.value}" for q in QnnFailure}
    assert named <= {c.value for c in FailureClass}, sorted(named - {c.value for c in FailureClass})
