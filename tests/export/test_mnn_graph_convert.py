"""The MNN converter, both ways, in-process (harness/mnn_graph.py): the real export's graph JSON
back to .mnn is byte-identical to its llm.mnn, a JSON that is no graph is a clear error, and
nothing in the project runs MNN's `mnnconvert` console script (its module pip-installs a
telemetry SDK that downgrades protobuf)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from harness.errors import ArtifactError
from harness.mnn_graph import build_mnn, main

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO.parent / "shared" / "models" / "smollm2-135m-instruct-mnn-npu16"


def test_graph_json_back_to_mnn_is_byte_identical(tmp_path):
    if not (MODEL / "llm.mnn.json.gz").is_file():
        pytest.skip(f"{MODEL} is absent (needs the sibling ../shared of the repo)")
    pytest.importorskip("_tools", reason="the mnn package (its converter) is not installed")
    graph = tmp_path / "llm.json"
    graph.write_bytes(gzip.decompress((MODEL / "llm.mnn.json.gz").read_bytes()))
    out = build_mnn(graph, tmp_path / "llm.mnn")
    assert out.read_bytes() == (MODEL / "llm.mnn").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left


def test_a_json_that_is_no_graph_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("_tools", reason="the mnn package (its converter) is not installed")
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(ArtifactError, match="not an MNN graph dump"):
        build_mnn(bad, tmp_path / "out.mnn")
    assert not (tmp_path / "out.mnn").exists()
    assert main([str(bad), str(tmp_path / "out.mnn")]) == 2 and "bad.json" in capsys.readouterr().err


# A call of the console script: an argv starting with it, or an import of its module.
CONSOLE_CALL = re.compile(r"""\[\s*['"]mnnconvert['"]\s*,|MNN\.tools\.mnnconvert|from MNN\.tools import mnnconvert""")


def test_nothing_in_the_project_runs_the_mnnconvert_console_script():
    found = []
    for folder in ("harness", "virtual_lab", "benchmarks", "suites", "tools"):
        for path in (REPO / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if CONSOLE_CALL.search(line):
                    found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
