"""The shipped SmolLM2 export with its activation-quantization metadata fixed (same weights),
built at test time in a temp folder (../shared is never written): each MLP Mul output, and the
tensors between it and its down_proj, take the calibrated range of the down_proj input (what
the product really spans); integer tensors lose their quantInfo. llm.mnn is rebuilt from the
export's own exact llm.mnn.json.gz through harness/mnn_graph.py's converter call."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from harness.checks.quant import analyze, integer_tensors
from harness.mnn_graph import write_graph_mnn

# Everything but the graph (and its JSON, which would no longer match) is copied as shipped.
GRAPH_FILES = ("llm.mnn", "llm.mnn.json.gz")


def fixed_export(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name not in GRAPH_FILES:
            shutil.copyfile(f, dst / f.name)
    with gzip.open(src / "llm.mnn.json.gz", "rt") as fh:
        graph = json.load(fh)
    names = {n: i for i, n in enumerate(graph["tensorName"])}
    quant = {e["index"]: e for e in graph["extraTensorDescribe"]}
    report = analyze(graph, source=str(src / "llm.mnn.json.gz"))
    for mul in report.mlp_muls:
        calibrated = quant[names[mul.hops[-1].tensor]]["quantInfo"]
        for hop in mul.hops[:-1]:
            quant[names[hop.tensor]]["quantInfo"] = dict(calibrated)
    ints = set().union(*integer_tensors(graph).values())
    graph["extraTensorDescribe"] = [e for e in graph["extraTensorDescribe"] if e["index"] not in ints]
    write_graph_mnn(graph, dst / "llm.mnn")
    return dst
