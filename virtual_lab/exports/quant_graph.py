"""The export's `llm.mnn`: a small real MNN graph carrying activation quantization as the
smooth quantizer writes it (docs/mnn-export-layout.md#activation-quantization): per block an
MLP `gate x up` Mul with `extraTensorDescribe` ranges. A healthy export gives each Mul the
range its operands' ranges give; the `activation_saturation` scenario copies the `up`
operand's range onto the product (the real fault), so harness.checks.quant judges it for real."""

from __future__ import annotations

import functools
import json
from typing import Any

from virtual_lab.exports.stub import stub_bytes

_QMAX = 32767  # 16-bit activations, as the NPU exports write them
_GATE = (-0.3, 4.0)  # real ranges of the operands (SiLU output, up_proj output)
_UP = (-3.5, 4.1)


def _quant(lo: float, hi: float) -> dict[str, Any]:
    scale = (hi - lo) / (2 * _QMAX + 1)
    return {"scale": scale, "zero": round(lo / scale), "min": -_QMAX, "max": _QMAX, "type": "DT_INT16"}


def graph(layers: int, *, saturated: bool) -> dict[str, Any]:
    """The JSON graph: an input, then per block SiLU-like gate, up, and their Mul."""
    names = ["hidden"]
    ops: list[dict[str, Any]] = [{"main_type": "Input", "type": "Input", "name": "hidden", "outputIndexes": [0],
                                  "main": {"dims": [1, 1, 64], "dtype": "DT_FLOAT", "dformat": "NCHW"},
                                  "defaultDimentionFormat": "NHWC"}]
    extra: list[dict[str, Any]] = []
    corners = [a * b for a in _GATE for b in _UP]
    product = (min(0.0, *corners), max(0.0, *corners))
    hidden = 0
    for n in range(layers):
        gate, up, mul = (len(names), len(names) + 1, len(names) + 2)
        names += [f"/blocks.{n}/mlp/act_fn/Mul_output_0", f"/blocks.{n}/mlp/up_proj/FakeLinear_output_0",
                  f"/blocks.{n}/mlp/Mul_output_0"]
        for idx, kind in ((gate, "TANH"), (up, "SIGMOID")):
            ops.append({"main_type": "UnaryOp", "type": "UnaryOp", "name": names[idx], "inputIndexes": [hidden],
                        "outputIndexes": [idx], "main": {"opType": kind, "T": "DT_FLOAT"},
                        "defaultDimentionFormat": "NHWC"})
        ops.append({"main_type": "BinaryOp", "type": "BinaryOp", "name": names[mul], "inputIndexes": [gate, up],
                    "outputIndexes": [mul], "main": {"opType": "MUL", "T": "DT_FLOAT", "activationType": 0},
                    "defaultDimentionFormat": "NHWC"})
        extra += [{"index": gate, "quantInfo": _quant(*_GATE)}, {"index": up, "quantInfo": _quant(*_UP)},
                  {"index": mul, "quantInfo": _quant(*(_UP if saturated else product))}]
        hidden = mul
    return {"bizCode": "MNN", "oplists": ops, "outputName": [names[hidden]], "preferForwardType": "CPU",
            "sourceType": "ONNX", "tensorName": names, "tensorNumber": 0, "usage": "INFERENCE",
            "extraTensorDescribe": extra}


@functools.lru_cache(maxsize=8)
def llm_mnn_bytes(layers: int, saturated: bool) -> bytes:
    """The graph as an .mnn file (the mnn package's converter, as for the NPU stubs)."""
    return stub_bytes(json.dumps(graph(layers, saturated=saturated), sort_keys=True))
