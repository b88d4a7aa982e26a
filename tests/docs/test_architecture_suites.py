"""docs/ARCHITECTURE.md's suite diagram is drawn from the registry: every registered suite (and
MATRIX) is listed with exactly its checks, in the registry's order. A check added to a suite
and not to the diagram (or the other way round) fails here."""

from __future__ import annotations

import re
from pathlib import Path

from harness.suite import MATRIX, SUITES, Suite

DOC = Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md"
# `NAME = [a, b,` and its continuation lines `c, d]`, inside the diagram's code block.
_LISTED = re.compile(r"^\s+(?P<name>[A-Z][A-Z0-9_]*)\s+=\s+\[(?P<body>[^\]]*(?:\n[^\]\n=]*)*)\]", re.M)


def _diagram() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("harness/suite/registry.py\n")
    return text[start:text.index("```", start)]


def listed_checks(diagram: str) -> dict[str, list[str]]:
    """Suite constant -> the checks the diagram lists for it."""
    return {m["name"]: [c.strip() for c in m["body"].replace("\n", " ").split(",") if c.strip()]
            for m in _LISTED.finditer(diagram)}


def _constant(suite: Suite) -> str:
    return "MATRIX" if suite is MATRIX else suite.name.upper()


def test_the_diagram_lists_every_suite_with_exactly_its_checks() -> None:
    drawn = listed_checks(_diagram())
    registry = {_constant(s): [c.name for c in s.checks] for s in (*SUITES.values(), MATRIX)}
    assert drawn == registry, "docs/ARCHITECTURE.md's suite diagram differs from harness/suite/registry.py"


def test_the_reader_sees_a_missing_check() -> None:
    """The comparison is not vacuous: a diagram that drops a check differs."""
    diagram = _diagram().replace("mrope_positions_image_split,", "")
    assert "mrope_positions_image_split" not in listed_checks(diagram)["QWEN3_VL"]
