"""Reading an MNN graph as JSON (`.json`, `.json.gz`, or `.mnn` via the mnn package's converter):
the one home of the converter call, used by the quantization check and the compiled-IO reader
(and `write_graph_mnn`, the way back, for a graph whose metadata was rewritten)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import ArtifactError


def load_graph_json(path: Path | str) -> dict[str, Any]:
    """Read an MNN graph as JSON: `.json`, `.json.gz`, or `.mnn` (dumped with the mnn
    package's converter). Raises ArtifactError naming the file on any problem."""
    path = Path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise ArtifactError(f"{path}: {what} (expected llm.mnn.json, llm.mnn.json.gz or llm.mnn)")
    if path.suffix == ".mnn":
        return dump_mnn(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        graph = json.loads(raw)
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path}: not a readable MNN graph JSON ({exc}); regenerate it with "
                            f"`mnnconvert -f MNN --modelFile llm.mnn --JsonFile llm.mnn.json`") from None
    _validate(graph, path)
    return graph


def dump_mnn(path: Path) -> dict[str, Any]:
    # The converter is called through `_tools` directly: the `mnnconvert` console script's
    # wrapper pip-installs a telemetry SDK (aliyun-log) on first use.
    script = "import sys, _tools; _tools.mnnconvert(['mnnconvert', '-f', 'MNN', '--modelFile', sys.argv[1], '--JsonFile', sys.argv[2]])"
    with tempfile.TemporaryDirectory(prefix="quant-json-") as tmp:
        out = Path(tmp) / "llm.mnn.json"
        try:
            proc = subprocess.run([sys.executable, "-c", script, str(path), str(out)],
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise ArtifactError(f"{path}: dumping it to JSON took over 300 s; dump it yourself with "
                                f"`mnnconvert -f MNN --modelFile {path} --JsonFile llm.mnn.json`") from None
        if "No module named '_tools'" in proc.stderr:
            raise ArtifactError(f"{path}: reading an .mnn file needs the converter from the `mnn` "
                                f"package (pip install 'harness[mnn]'), or pass llm.mnn.json instead")
        try:   # the converter exits 0 even when it fails, and may leave an empty file
            graph = json.loads(out.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            detail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            raise ArtifactError(f"{path}: mnnconvert could not dump it to JSON ({detail[0]}); "
                                f"is it an MNN model file?") from None
    _validate(graph, path)
    graph["_harness_scale_precision"] = "6 decimals"   # the dump prints floats with %f
    return graph


def write_graph_mnn(graph: dict[str, Any], dst: Path) -> Path:
    """Convert a graph JSON back to an .mnn file at `dst` (the smooth quantizer's last step,
    docs/mnn-export-layout.md#activation-quantization), through the same converter call."""
    graph = {k: v for k, v in graph.items() if not k.startswith("_harness")}
    script = "import sys, _tools; _tools.mnnconvert(['mnnconvert'] + sys.argv[1:])"
    dst = Path(dst)
    with tempfile.TemporaryDirectory(prefix="graph-mnn-") as tmp:
        src, out = Path(tmp) / "graph.json", Path(tmp) / "graph.mnn"
        src.write_text(json.dumps(graph), encoding="utf-8")
        proc = subprocess.run([sys.executable, "-c", script, "-f", "JSON", "--modelFile", str(src),
                               "--MNNModel", str(out), "--bizCode", "MNN"], capture_output=True, text=True,
                              timeout=300)
        if not out.is_file() or out.stat().st_size == 0:
            detail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            raise ArtifactError(f"{dst}: the mnn converter could not write it ({detail[0]}); "
                                "is the `mnn` package installed (pip install 'harness[mnn]')?")
        tmp_dst = dst.with_name(dst.name + ".tmp")
        tmp_dst.write_bytes(out.read_bytes())
        tmp_dst.replace(dst)  # a temp name, then renamed: never half a model
    return dst


def _validate(graph: Any, path: Path) -> None:
    if not isinstance(graph, dict) or not isinstance(graph.get("oplists"), list) \
            or not isinstance(graph.get("tensorName"), list):
        raise ArtifactError(f"{path}: JSON has no `oplists`/`tensorName`: not an MNN graph dump")
