"""A damaged debug build is undecidable (issue 44.1, 44.2, 44.9): `python -m harness.checks.localize`
answers exit 2 with one JSON object on stdout, never 1 ("departed"), never a traceback, never a hang;
the suite's check (a night's) fails it by name instead of an internal error; a failed debug run
shows the runner's RuntimeError, not only QNN's teardown lines after it. No ExecuTorch needed: the
encodings are read (and refused) before ExecuTorch's Inspector is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.checks.localize.cli import main
from harness.runners.executorch.localize import _runner_said

REPO = Path(__file__).resolve().parents[2]
GOOD_NODE: dict[str, Any] = {"name": "aten_mul_tensor", "target": "aten.mul.Tensor", "shape": [1, 4],
             "quant": {"scale": 0.1, "zero_point": 0, "quant_min": 0, "quant_max": 255, "dtype": "uint8"}}


def _folder(tmp_path: Path, encodings: Any) -> Path:
    """A pulled run's four files with the given encodings (the others never read when they are bad)."""
    for name in ("etdump.etdp", "debug_output.bin", "etrecord.bin"):
        (tmp_path / name).write_bytes(os.urandom(256))
    if encodings is not None:
        (tmp_path / "qnn_encodings.json").write_text(encodings if isinstance(encodings, str) else json.dumps(encodings))
    return tmp_path


def _answer(folder: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main([str(folder), "--json"])
    out = capsys.readouterr().out
    answer = json.loads(out)  # one JSON object and nothing else
    assert code == 2 and answer["outcome"] == "undecidable", answer
    return answer


@pytest.mark.parametrize("nodes, said", [
    (["a", 1, None], "nodes[0]: a str, not an object"),
    ([{**GOOD_NODE, "quant": {**GOOD_NODE["quant"], "scale": "0.1"}}], "quant 'scale' is not a number"),
    ([{**GOOD_NODE, "axis_order": 7}], "'axis_order' is not a list"),
    ([{**GOOD_NODE, "shape": ["abc"]}], "'shape' ['abc'] is not a list of sizes"),
    ([{"target": "aten.mul.Tensor"}], "no 'name' string"),
])
def test_encodings_of_the_wrong_types_are_undecidable(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      nodes: list[Any], said: str) -> None:
    answer = _answer(_folder(tmp_path, {"format": "16a8w", "nodes": nodes}), capsys)
    assert said in answer["reason"] and "qnn_encodings.json" in answer["reason"], answer


def test_encodings_nested_200000_deep_are_undecidable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = '{"format": "16a8w", "nodes": ' + "[" * 200_000 + "]" * 200_000 + "}"
    answer = _answer(_folder(tmp_path, deep), capsys)
    assert "nested too deep" in answer["reason"], answer


def test_encodings_that_are_a_fifo_do_not_hang(tmp_path: Path) -> None:
    """In a child with a timeout: before the fix the read blocked forever on the FIFO."""
    folder = _folder(tmp_path, None)
    os.mkfifo(folder / "qnn_encodings.json")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "harness.checks.localize", str(folder), "--json"], capture_output=True,
                          text=True, timeout=60, env=env)
    answer = json.loads(done.stdout)
    assert done.returncode == 2 and answer["outcome"] == "undecidable", (done.stdout, done.stderr)
    assert "qnn_encodings.json" in answer["reason"] and "Traceback" not in done.stderr


def test_a_failed_run_shows_its_runtime_error_before_qnns_teardown() -> None:
    stderr = "\n".join([
        "[INFO] [Qnn ExecuTorch]: Running level=3 optimization.",
        "RuntimeError: Failed to execute method forward, error: 0x1",
        "[INFO] [Qnn ExecuTorch]: Destroy Qnn context",
        "[INFO] [Qnn ExecuTorch]: Destroy Qnn device",
        "[INFO] [Qnn ExecuTorch]: Destroy Qnn backend",
    ])
    said = _runner_said("", stderr)
    assert said.startswith("RuntimeError: Failed to execute method forward, error: 0x1"), said
