"""The example exporters are the user's programs (issue 36): they import nothing of the harness,
so they run under any Python with executorch and torch (docs/executorch-reference.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "et_qnn"


@pytest.mark.parametrize("script", ["lower_decoder.py", "plant_fault.py"])
def test_an_example_exporter_imports_nothing_of_the_harness(script: str) -> None:
    tree = ast.parse((EXAMPLE / script).read_text(encoding="utf-8"))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [m for m in imported if m == "harness" or m.startswith("harness.")], imported
