"""The context binaries through the QNN SDK: `qnn-context-binary-utility`'s dump of each binary
-> its graphs, tensor dims and, where the dump says so, the soc/arch it was built for."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import soc
from harness.errors import ArtifactError
from harness.qnn.compiled_io.stub import _configs
from harness.qnn.compiled_io.types import SOURCE_SDK, ContextBinary, Dims, GraphIO, StubIO

SDK_TOOL = "qnn-context-binary-utility"


def sdk_tool(qnn_sdk: Path | str | None) -> Path | None:
    """`qnn-context-binary-utility` in a QNN SDK root (bin/x86_64-linux-clang first), if present."""
    if not qnn_sdk:
        return None
    root = Path(qnn_sdk).expanduser()
    candidates = [root / "bin" / "x86_64-linux-clang" / SDK_TOOL, *sorted(root.glob(f"bin/*/{SDK_TOOL}"))]
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def dump_context_binary(tool: Path, binary: Path) -> dict[str, object]:
    """`qnn-context-binary-utility --context_binary B --json_file OUT` -> the JSON it writes."""
    with tempfile.TemporaryDirectory(prefix="qnn-ctx-") as tmp:
        out = Path(tmp) / "ctx.json"
        try:
            proc = subprocess.run([str(tool), "--context_binary", str(binary), "--json_file", str(out)],
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise ArtifactError(f"{binary}: {tool} took over 300 s; run it by hand to see why") from None
        try:
            data = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            detail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            raise ArtifactError(f"{binary}: {tool.name} could not read it ({detail[0]}); a context binary "
                                "from a newer QNN SDK than --qnn-sdk, or a truncated copy?") from None
    if not isinstance(data, dict):
        raise ArtifactError(f"{binary}: {tool.name} wrote no JSON object")
    return data


def _find_key(data: object, keys: tuple[str, ...]) -> Any:
    """First value under any of `keys` (case-insensitive), searching the dump depth-first."""
    lowered = {k.lower() for k in keys}
    stack = [data]
    while stack:
        cur = stack.pop(0)
        if isinstance(cur, dict):
            for k, v in cur.items():
                if k.lower() in lowered and isinstance(v, (int, str)) and str(v).strip():
                    return v
            stack.extend(v for v in cur.values() if isinstance(v, (dict, list)))
        elif isinstance(cur, list):
            stack.extend(cur)
    return None


def parse_context_dump(data: Mapping[str, Any], path: str, stub_binary: ContextBinary | None) -> ContextBinary:
    """A qnn-context-binary-utility dump -> ContextBinary. QNN names MNN's graph tensors `t<K>`;
    the stub's plugin lists them in the same order as its inputs, so names are mapped by position."""
    raw_info = data.get("info")
    info: Mapping[str, Any] = raw_info if isinstance(raw_info, dict) else data
    graphs = []
    stub_graphs = {g.name: g for g in stub_binary.graphs} if stub_binary else {}
    for si, g in enumerate(info.get("graphs") or []):
        gi = g.get("info", g) if isinstance(g, dict) else {}
        gname = str(gi.get("graphName", f"graph{si}"))
        ref = stub_graphs.get(gname)
        ref_in = list(ref.inputs) if ref else []
        ref_out = list(ref.outputs) if ref else []

        def tensors(items: Any, ref_names: list[str]) -> dict[str, Dims]:
            out: dict[str, Dims] = {}
            for k, t in enumerate(items or []):
                ti = t.get("info", t) if isinstance(t, dict) else {}
                nm = ref_names[k] if k < len(ref_names) else str(ti.get("name", f"#{k}"))
                out[nm] = tuple(int(d) for d in ti.get("dimensions") or [])
            return out

        graphs.append(GraphIO(gname, ref.index if ref else si, tensors(gi.get("graphInputs"), ref_in),
                              tensors(gi.get("graphOutputs"), ref_out)))
    raw_soc = _find_key(data, ("socModel", "soc_model", "socId", "soc_id"))
    raw_arch = _find_key(data, ("dspArch", "dsp_arch", "htpArch", "htp_arch"))
    soc_id = int(raw_soc) if raw_soc is not None and str(raw_soc).strip().isdigit() else None
    arch = soc.normalize_arch(raw_arch) if raw_arch is not None else None
    return ContextBinary(path, tuple(sorted(graphs, key=lambda g: g.index)), SOURCE_SDK, soc_id, arch)


def _with_sdk(root: Path, stub: StubIO, tool: Path, problems: list[str]) -> StubIO:
    def read(b: ContextBinary) -> ContextBinary | str:
        p = root / b.path
        if not p.is_file():
            return b
        try:
            return parse_context_dump(dump_context_binary(tool, p), b.path, b)
        except ArtifactError as exc:
            return str(exc)

    # One tool process per binary (30+ for an LLM): a few at a time, results in stub order.
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(read, stub.binaries))
    bins = []
    for b, r in zip(stub.binaries, results):
        if isinstance(r, str):
            problems.append(r)
            bins.append(b)
        else:
            bins.append(r)
    source = SOURCE_SDK if bins and all(b.source == SOURCE_SDK for b in bins) else stub.source
    configs = stub.configs
    if source == SOURCE_SDK:
        local: list[str] = []
        configs = _configs(bins, stub.declared, stub.outputs, local, stub.path)
        problems.extend(local)
    return StubIO(stub.path, source, stub.declared, stub.outputs, tuple(bins), configs, stub.problems)
