"""An MNN graph as JSON (`.json`, `.json.gz`, or `.mnn` via the mnn package's converter), and a
graph JSON back to `.mnn`: the one home of the converter call, used by the quantization check,
the compiled-IO reader and the fault-making benchmarks.

The converter is always called as `_tools.mnnconvert([...])` from the `mnn` package, never
through the `mnnconvert` console script: that script's module pip-installs a telemetry SDK
(aliyun-log-python-sdk) on first import, which downgraded protobuf below what grpcio needs.

    python -m harness.mnn_graph llm.mnn llm.mnn.json      (dump; the direction from the suffixes)
    python -m harness.mnn_graph llm.json llm.mnn          (build)
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

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
                            f"`python -m harness.mnn_graph llm.mnn llm.mnn.json`") from None
    _validate(graph, path)
    return cast(dict[str, Any], graph)


# `_tools` (the mnn package's C converter), never the console script; in a child process, as
# the converter prints to stdout and may abort on a bad file.
_CONVERT = "import sys, _tools; _tools.mnnconvert(['mnnconvert'] + sys.argv[1:])"


def _convert(path: Path, args: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run([sys.executable, "-c", _CONVERT, *args], capture_output=True, text=True,
                              timeout=600)
    except subprocess.TimeoutExpired:
        raise ArtifactError(f"{path}: {what} took over 600 s; run `python -m harness.mnn_graph` "
                            f"on it yourself to see where it stops") from None
    if "No module named '_tools'" in proc.stderr:
        raise ArtifactError(f"{path}: {what} needs the converter from the `mnn` package "
                            f"(pip install 'harness[mnn]'), or pass llm.mnn.json instead")
    return proc


def dump_mnn(path: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="quant-json-") as tmp:
        out = Path(tmp) / "llm.mnn.json"
        proc = _convert(path, ["-f", "MNN", "--modelFile", str(path), "--JsonFile", str(out)],
                        "dumping it to JSON")
        try:   # the converter exits 0 even when it fails, and may leave an empty file
            graph = json.loads(out.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            detail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            raise ArtifactError(f"{path}: the converter could not dump it to JSON ({detail[0]}); "
                                f"is it an MNN model file?") from None
    _validate(graph, path)
    graph["_harness_scale_precision"] = "6 decimals"   # the dump prints floats with %f
    return cast(dict[str, Any], graph)


def build_mnn(graph_json: Path, out: Path) -> Path:
    """Convert an MNN graph JSON (the dump's format) to an `.mnn` file at `out` (a temp name in
    out's folder, renamed when the converter wrote a non-empty file)."""
    if not graph_json.is_file():
        raise ArtifactError(f"{graph_json}: no such file (expected an MNN graph JSON)")
    try:   # the converter skips what it does not know and writes a near-empty model from anything
        _validate(json.loads(graph_json.read_bytes()), graph_json)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{graph_json}: not a readable MNN graph JSON ({exc})") from None
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    proc = _convert(graph_json, ["-f", "JSON", "--modelFile", str(graph_json), "--MNNModel", str(tmp),
                                 "--bizCode", "MNN"], "converting it to .mnn")
    # The converter exits 0 even when it fails: judge by the file it leaves.
    if not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        detail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise ArtifactError(f"{graph_json}: the converter wrote no .mnn ({detail[0]}); is it an MNN graph JSON?")
    os.replace(tmp, out)
    return out


def write_graph_mnn(graph: Mapping[str, object], dst: Path) -> Path:
    """A graph JSON held in memory (e.g. with its quantization metadata rewritten) to an
    `.mnn` file at `dst`, through build_mnn."""
    graph = {k: v for k, v in graph.items() if not k.startswith("_harness")}
    with tempfile.TemporaryDirectory(prefix="graph-mnn-") as tmp:
        src = Path(tmp) / "graph.json"
        src.write_text(json.dumps(graph), encoding="utf-8")
        return build_mnn(src, Path(dst))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[0].endswith((".mnn", ".json")):
        print("usage: python -m harness.mnn_graph IN.mnn OUT.json | IN.json OUT.mnn", file=sys.stderr)
        return 2
    src, dst = Path(args[0]), Path(args[1])
    try:
        if src.suffix == ".mnn":
            graph = {k: v for k, v in dump_mnn(src).items() if not k.startswith("_harness")}
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(graph))
            os.replace(tmp, dst)
        else:
            build_mnn(src, dst)
    except ArtifactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _validate(graph: object, path: Path) -> None:
    if not isinstance(graph, dict) or not isinstance(graph.get("oplists"), list) \
            or not isinstance(graph.get("tensorName"), list):
        raise ArtifactError(f"{path}: JSON has no `oplists`/`tensorName`: not an MNN graph dump")


if __name__ == "__main__":
    sys.exit(main())
