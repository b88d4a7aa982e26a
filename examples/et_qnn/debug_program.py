"""The debug build of lower_decoder.py's program (`lower_decoder.py ... --debug-program`): the same
model, quantization and target, lowered with QNN's `dump_intermediate_outputs` so a run with an ETDump
and a debug buffer records every delegated op's output. Written in ExecuTorch's own conventions (its
QNN tests, backends/qualcomm/tests/utils.py) plus the one file a saved ETRecord loses:

    debug.pte            the program with intermediate dumps
    etrecord.bin         its ETRecord, with the representative inputs (the CPU reference runs them)
    debug_inputs.npz     the same inputs as arrays, for the runner (input_0, input_1, ...)
    qnn_encodings.json   per edge node: QNN's quantization (scale, zero point, bounds), layout,
                         shape, the module it came from (a read-back ETRecord drops QCOM_QUANT_ATTRS)

Uses only ExecuTorch's, torch's and numpy's API (no harness import), so any exporter can copy it.
"""

from __future__ import annotations

import json
import operator
import os
from pathlib import Path
from typing import Any

REFERENCE_GRAPH = "edge_after_transform/forward"  # QNNIntermediateDebugger.reference_graph_name


def plant_mul_range_fault(quantized: Any, layer: int) -> str:
    """The seed fault in ExecuTorch form: the SwiGLU MUL of `layer` quantizes its output with its
    SiLU operand's (scale, zero point) instead of its own calibrated ones. Returns the MUL's name."""
    graph = quantized.graph
    muls = [n for n in graph.nodes if n.op == "call_function" and "mul" in str(n.target)
            and f"layers.{layer}" in _module_path(n) and _silu_input(n) is not None]
    if not muls:
        raise SystemExit(f"lower_decoder: no SwiGLU MUL in layer {layer} (use --mlp swiglu and a layer < --layers)")
    mul = muls[0]
    operand_dq = _silu_input(mul)
    out_q = next(u for u in mul.users if "quantize_per_tensor" in str(u.target))
    scale, zero_point = operand_dq.args[1], operand_dq.args[2]
    for node in [out_q, *[u for u in out_q.users if "dequantize_per_tensor" in str(u.target)]]:
        node.args = (node.args[0], scale, zero_point, *node.args[3:])
    quantized.recompile()
    return str(mul.name)


def _silu_input(mul: Any) -> Any:
    """The dequantize node feeding `mul` from a SiLU, or None. QnnQuantizer decomposes SiLU into
    x * sigmoid(x), so the SiLU is a silu node or a MUL with a sigmoid operand."""
    for arg in mul.args:
        src = _producer(arg)
        if src is not None and ("silu" in str(src.target) or _is_decomposed_silu(src)):
            return arg
    return None


def _producer(dq: Any) -> Any:
    """The op whose output a dequantize node reads back (through its quantize), or None."""
    if getattr(dq, "op", "") != "call_function" or "dequantize" not in str(dq.target):
        return None
    q = dq.args[0]
    return q.args[0] if getattr(q, "op", "") == "call_function" and "quantize" in str(q.target) else None


def _is_decomposed_silu(node: Any) -> bool:
    return "mul" in str(node.target) and any("sigmoid" in str(getattr(_producer(a), "target", ""))
                                             for a in node.args)


def _module_path(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return str(list(stack.values())[-1][0]) if stack else ""


def node_encodings(edge_ep: Any) -> list[dict[str, Any]]:
    """One entry per call_function node of the CPU reference graph, in graph order."""
    from executorch.backends.qualcomm.utils.constants import (
        QCOM_AXIS_ORDER, QCOM_DTYPE, QCOM_QUANT_ATTRS, QCOM_QUANT_MAX, QCOM_QUANT_MIN, QCOM_SCALE, QCOM_ZERO_POINT)

    out: list[dict[str, Any]] = []
    for node in edge_ep.graph_module.graph.nodes:
        if node.op != "call_function" or node.target == operator.getitem:
            continue
        val = node.meta.get("val")
        entry: dict[str, Any] = {"name": node.name, "target": str(node.target), "debug_handle": node.meta.get("debug_handle"),
                                 "module": _module_path(node),
                                 "inputs": [a.name for a in node.all_input_nodes],
                                 "shape": list(val.shape) if hasattr(val, "shape") else None,
                                 "dtype": str(val.dtype).removeprefix("torch.") if hasattr(val, "dtype") else None,
                                 "axis_order": list(node.meta[QCOM_AXIS_ORDER]) if node.meta.get(QCOM_AXIS_ORDER) else None}
        attrs = node.meta.get(QCOM_QUANT_ATTRS)
        if attrs and not hasattr(attrs.get(QCOM_SCALE), "shape"):  # per-tensor activations only
            entry["quant"] = {"scale": float(attrs[QCOM_SCALE]), "zero_point": int(attrs[QCOM_ZERO_POINT]),
                              "quant_min": int(attrs[QCOM_QUANT_MIN]), "quant_max": int(attrs[QCOM_QUANT_MAX]),
                              "dtype": str(attrs[QCOM_DTYPE]).removeprefix("torch.")}
        out.append(entry)
    return out


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_debug_program(args: Any, build_model: Any, quantize: Any, calibration_ids: list[int]) -> int:
    import io

    import numpy as np
    import torch
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec, generate_qnn_executorch_compiler_spec, to_edge_transform_and_lower_to_qnn)

    chip = getattr(QcomChipset, args.soc)
    quantized, _sample = quantize(build_model(args), chip, args.format, args.context)
    planted = None
    if args.plant_mul_range_fault is not None:
        planted = plant_mul_range_fault(quantized, args.plant_mul_range_fault)
    # The debug forward: the calibration's first step (the program's state starts empty, as the
    # reference graph's does), so a healthy op's ranges cover it and only a fault clips.
    inputs = (torch.tensor([[calibration_ids[0]]]), torch.tensor([0]))
    spec = generate_qnn_executorch_compiler_spec(soc_model=chip, dump_intermediate_outputs=True,
                                                 backend_options=generate_htp_compiler_spec(use_fp16=False))
    edge = to_edge_transform_and_lower_to_qnn(quantized, inputs, spec, generate_etrecord=True)
    program = edge.to_executorch()
    etrecord = program.get_etrecord()
    etrecord.update_representative_inputs(inputs)
    out = Path(args.out).resolve()
    tmp_record = out / ".etrecord.bin.tmp"
    etrecord.save(str(tmp_record))
    os.replace(tmp_record, out / "etrecord.bin")
    _write(out / "debug.pte", program.buffer)
    buf = io.BytesIO()
    np.savez(buf, **{f"input_{i}": t.numpy() for i, t in enumerate(inputs)})
    _write(out / "debug_inputs.npz", buf.getvalue())
    nodes = node_encodings(etrecord.graph_map[REFERENCE_GRAPH])
    meta = {"reference_graph": REFERENCE_GRAPH, "soc": args.soc, "format": args.format, "layers": args.layers,
            "dim": args.dim, "mlp": args.mlp, "planted_fault": planted, "nodes": nodes}
    _write(out / "qnn_encodings.json", json.dumps(meta, indent=1).encode())
    print("lower_decoder: wrote the debug program", out / "debug.pte", f"({len(nodes)} reference ops"
          + (f", fault planted at {planted}" if planted else "") + ")")
    return 0
