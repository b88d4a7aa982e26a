"""`python -m harness.checks.shapes EXPORT_DIR [--json] [--config NAME] [--qnn-sdk DIR]
[--image-sizes WxH] [--soc-id N --dsp-arch vNN]` prints the compiled IO and the findings
(exit 0 no error, 1 errors, 2 bad input)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.checks.shapes.compiled import fmt_shape, graph_inputs
from harness.checks.shapes.findings import ERROR
from harness.checks.shapes.static import check_export_shapes
from harness.errors import ArtifactError
from harness.qnn.compiled_io import CompiledIO, read_compiled_io


def _phase(kind: str, index: int, cfg: dict[str, Any]) -> str:
    if kind != "llm":
        return f"shape {index}"
    ids = graph_inputs(cfg).get("input_ids")
    if ids:
        return "decode" if ids[0] == 1 else "prefill"
    return f"shape {index}"


def compiled_chunk_size(io: CompiledIO) -> int | None:
    """The prefill chunk the LLM graphs were compiled for (input_ids seq > 1), or None."""
    stub = io.stubs.get("llm")
    seqs = {(graph_inputs(c).get("input_ids") or [0])[0] for c in stub.configs} if stub else set()
    return max((s for s in seqs if s > 1), default=None)


def describe_io(io: CompiledIO) -> dict[str, Any]:
    """What the CLI prints: source, compiled chunk size and each stub's inputs per shape."""
    inputs: dict[str, object] = {}
    for kind, stub in io.stubs.items():
        inputs[kind] = {_phase(kind, n, c): {"graph_inputs": graph_inputs(c), "outputs": list(c.get("outputs", []))}
                        for n, c in enumerate(stub.configs)}
    return {
        "export": str(io.root), "source": io.source, "chunk_size": compiled_chunk_size(io),
        "inputs": inputs,
        "stubs": {k: {"path": s.path, "source": s.source,
                      "declared_inputs": {n: list(d) for n, d in s.declared.items()},
                      "binaries": [b.path for b in s.binaries]} for k, s in io.stubs.items()},
        "target": {"soc_id": io.target.soc_id, "dsp_arch": io.target.dsp_arch, "source": io.target.source},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.checks.shapes",
                                     description="Print an export's compiled QNN IO and the static shape findings.")
    parser.add_argument("export_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--config", default=None,
                        help="the runtime config the run will use (default: every config*.json)")
    parser.add_argument("--qnn-sdk", default=None, help="QNN SDK root: read the context binaries too")
    parser.add_argument("--image-sizes", default=None, help="WxH[,WxH] the run will ask for (width first)")
    parser.add_argument("--soc-id", type=int, default=None)
    parser.add_argument("--dsp-arch", default=None)
    args = parser.parse_args(argv)
    try:
        io = read_compiled_io(args.export_dir, qnn_sdk=args.qnn_sdk)
        findings = check_export_shapes(args.export_dir, args.config, image_sizes=args.image_sizes,
                                       soc_id=args.soc_id, dsp_arch=args.dsp_arch, compiled=io)
    except ArtifactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    errors = [f for f in findings if f.severity == ERROR]
    report = describe_io(io)
    if args.json:
        report["findings"] = [f.to_json() for f in findings]
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['export']}: compiled IO from {report['source']}, chunk size {report['chunk_size']}, "
              f"target soc_id {io.target.soc_id} dsp_arch {io.target.dsp_arch} ({io.target.source})")
        for kind, shapes in report["inputs"].items():
            for phase, entry in shapes.items():
                dims = ", ".join(f"{n} {fmt_shape(d)}" for n, d in entry["graph_inputs"].items())
                print(f"  {kind} {phase}: {dims or '-'} -> {', '.join(entry['outputs']) or '-'}")
        for f in findings:
            print(f.explain())
        print(f"{len(errors)} error(s), {len(findings) - len(errors)} warning(s)")
    return 1 if errors else 0


__all__ = ["compiled_chunk_size", "describe_io", "main"]
