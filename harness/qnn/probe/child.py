"""The probe's child process: lower single-op probes for one SoC at some formats, in order.

`python -m harness.qnn.probe.child --soc SA8295 --format 16a8w,8a8w --ops layer_norm,linear`
(started by harness/qnn/probe/run.py with the QNN environment and a neutral temp cwd; exit 1
when an op did not lower, as a lowering script that raised would). Each (format, op)'s
section of the combined output starts with a BEGIN marker line and ends with a RESULT line
carrying one JSON object; QNN's own log lines fall between them, so the parent gives each op
its own log. C stdio is flushed at each marker so QNN's lines stay in their op's section.
One child lowers many probes: importing torch and ExecuTorch costs more than a lowering.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
import traceback
from collections.abc import Sequence

BEGIN = "@@qnn_probe begin "
RESULT = "@@qnn_probe result "
_CALLS = ("executorch_call_delegate",)
_IGNORED = ("getitem", "quantize_per", "dequantize_per", "alloc", "_to_copy", "_to_dim_order_copy")


def _flush() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def _lower(op: str, fmt: str, soc: str) -> dict[str, object]:
    import torch
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
        to_edge_transform_and_lower_to_qnn,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from harness.qnn.probe.probes import make_probe, make_quantizer

    t0 = time.time()
    probe = make_probe(op)
    g = torch.Generator().manual_seed(1)
    calib = [probe.inputs(g) for _ in range(4)]
    graph = torch.export.export(probe.module, calib[0], strict=False).module()
    prepared = prepare_pt2e(graph, make_quantizer(fmt, soc, probe, graph))
    with torch.no_grad():
        for c in calib:
            prepared(*c)
    converted = convert_pt2e(prepared)
    t1 = time.time()
    spec = generate_qnn_executorch_compiler_spec(
        soc_model=getattr(QcomChipset, soc), backend_options=generate_htp_compiler_spec(use_fp16=False))
    edge = to_edge_transform_and_lower_to_qnn(converted, calib[0], spec)
    nodes = [n for n in edge.exported_program().graph_module.graph.nodes if n.op == "call_function"]
    delegates = sum(1 for n in nodes if any(c in str(n.target) for c in _CALLS))
    cpu = sorted({str(n.target) for n in nodes if not any(c in str(n.target) for c in _CALLS + _IGNORED)})
    # QNN compiled the context binary inside the lowering (ExecuTorch's preprocess); serializing
    # the program (to_executorch) involves no QNN and is left out to keep the table's run short.
    blobs = [len(m.processed_bytes) for _, m in edge.exported_program().graph_module.named_children()
             if hasattr(m, "processed_bytes")]
    return {"lowered": True, "delegates": delegates, "cpu_ops": cpu, "delegate_bytes": blobs,
            "t_quant_s": round(t1 - t0, 2), "t_lower_s": round(time.time() - t1, 2)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.qnn.probe.child")
    ap.add_argument("--soc", required=True)
    ap.add_argument("--format", required=True, help="comma-separated formats")
    ap.add_argument("--ops", required=True, help="comma-separated probe names")
    args = ap.parse_args(argv)
    failed = 0
    for fmt in args.format.split(","):
        for op in args.ops.split(","):
            print(f"{BEGIN}{fmt} {op}", flush=True)
            _flush()
            try:
                out = {"format": fmt, "op": op, **_lower(op, fmt, args.soc)}
            except Exception as exc:  # noqa: BLE001 - QNN's refusal is the measurement, recorded, not raised
                traceback.print_exc()
                out = {"format": fmt, "op": op, "lowered": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
                failed += 1
            _flush()
            print(RESULT + json.dumps(out), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
