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


def edge_swiglu_mul(nodes: list[dict[str, Any]], layer: int) -> str:
    """The reference graph's name of `layer`'s SwiGLU MUL: the mul of that layer with a SiLU
    operand (a silu node, or the decomposed x * sigmoid(x))."""
    by_name = {n["name"]: n for n in nodes}

    def is_silu(name: str) -> bool:
        node = by_name.get(name, {})
        return "silu" in node.get("target", "") or ("mul" in node.get("target", "") and any(
            "sigmoid" in by_name.get(i, {}).get("target", "") for i in node.get("inputs", [])))

    for node in nodes:
        if "mul" in node["target"] and node["module"] == f"layers.{layer}" and any(map(is_silu, node["inputs"])):
            return str(node["name"])
    raise SystemExit(f"lower_decoder: the reference graph has no SwiGLU MUL in layer {layer}")


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


DEBUG_WINDOW = 16  # prompt tokens in the debug forward: every position the KV program's first steps see


def write_debug_program(args: Any, build_model: Any, quantize: Any) -> int:
    import io

    import numpy as np
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec, generate_qnn_executorch_compiler_spec, to_edge_transform_and_lower_to_qnn)

    chip = getattr(QcomChipset, args.soc)
    # The debug forward: the calibration's first window as one prefill from the empty cache (as the
    # reference graph's state starts), every token attending over its real history; calibrated on the
    # same positions, so a healthy op's ranges cover it and only a fault clips.
    plant = None
    if args.plant_mul_range_fault is not None:  # the seed fault, planted as plant_fault.py plants it
        from plant_fault import plant_mul_range

        plant = plant_mul_range(args.plant_mul_range_fault)
    quantized, inputs = quantize(build_model(args), chip, args.format, args.context, window=DEBUG_WINDOW,
                                 before_convert=plant)
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
    # the reference graph renames nodes: name the planted MUL as the comparison does
    planted = None if plant is None else edge_swiglu_mul(nodes, args.plant_mul_range_fault)
    meta = {"reference_graph": REFERENCE_GRAPH, "soc": args.soc, "format": args.format, "layers": args.layers,
            "dim": args.dim, "mlp": args.mlp, "planted_fault": planted, "nodes": nodes}
    _write(out / "qnn_encodings.json", json.dumps(meta, indent=1).encode())
    print("lower_decoder: wrote the debug program", out / "debug.pte", f"({len(nodes)} reference ops"
          + (f", fault planted at {planted}" if planted else "") + ")")
    return 0
