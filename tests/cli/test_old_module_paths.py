"""The module CLIs moved into packages (issue 35); their old `python -m` paths still run the new
module, whose usage names the new path, and define no names of their own (no second import path)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MOVED = {
    "harness.compiled_io": "harness.qnn.compiled_io",
    "harness.qnn_probe": "harness.qnn.probe",
    "harness.runners.qnn_log": "harness.qnn.log",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_runs_the_new_module(old: str) -> None:
    res = subprocess.run([sys.executable, "-m", old, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"python -m {MOVED[old]}" in res.stdout, res.stdout
    assert "Warning" not in res.stderr, res.stderr


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_defines_nothing(old: str) -> None:
    tree = ast.parse((REPO / (old.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
    top = [type(n).__name__ for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    assert top == ["If"], f"{old}: only a docstring and an `if __name__ == '__main__':` block, got {top}"
