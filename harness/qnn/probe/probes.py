"""The single-op probes and the quantization formats they are lowered at (docs/qnn-arch-limits.md).

Imported only in the probe's child process (it needs torch and ExecuTorch's Qualcomm backend):
the parent names probes and formats through `PROBE_NAMES` / `PROBE_FORMATS` without importing
torch. Each probe is one op on float inputs; the QNN quantizer puts the quantize/dequantize
pairs around it, so QNN's validator sees that op at that format and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The names the table uses; `layer_norm_w4` is the ExecuTorch v68 workaround: layer_norm with
# its weight annotated as a 4-bit weight, where ExecuTorch's LayerNorm annotator gives the weight
# the activation's (16-bit) spec (htp_rules.py LayerNorm.annotate).
PROBE_NAMES: tuple[str, ...] = ("layer_norm", "layer_norm_w4", "rms_norm", "linear", "matmul", "conv2d", "softmax")
PROBE_FORMATS: tuple[str, ...] = ("16a16w", "16a8w", "16a4w", "16a4w_block", "8a8w", "8a4w")
# Measured by default (8a4w on request: the table's 2-core run takes over an hour already).
DEFAULT_FORMATS: tuple[str, ...] = ("16a16w", "16a8w", "16a4w", "16a4w_block", "8a8w")
_DIM = 64
_SEQ = 16
_BLOCK = 32  # LPBQ block along the input channels (ExecuTorch's llama recipes use 32)


@dataclass(frozen=True)
class Probe:
    name: str
    module: Any  # torch.nn.Module
    inputs: Callable[[Any], tuple[object, ...]]  # torch.Generator -> sample inputs


def _modules() -> dict[str, tuple[Any, Callable[[Any], tuple[object, ...]]]]:
    import torch

    class MatMul(torch.nn.Module):  # activation x activation, as attention's q @ k^T
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.matmul(a, b.transpose(-1, -2))

    class Softmax(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x, dim=-1)

    def seq(g: Any) -> tuple[object, ...]:
        return (torch.randn(1, _SEQ, _DIM, generator=g),)

    def two(g: Any) -> tuple[object, ...]:
        return (torch.randn(1, 4, _SEQ, _DIM, generator=g), torch.randn(1, 4, _SEQ, _DIM, generator=g))

    def image(g: Any) -> tuple[object, ...]:
        return (torch.randn(1, _DIM, 8, 8, generator=g),)

    return {
        "layer_norm": (torch.nn.LayerNorm(_DIM), seq),
        "layer_norm_w4": (torch.nn.LayerNorm(_DIM), seq),
        "rms_norm": (torch.nn.RMSNorm(_DIM), seq),
        "linear": (torch.nn.Linear(_DIM, _DIM), seq),
        "matmul": (MatMul(), two),
        "conv2d": (torch.nn.Conv2d(_DIM, _DIM, 3, padding=1), image),
        "softmax": (Softmax(), seq),
    }


def make_probe(name: str) -> Probe:
    import torch

    if name not in PROBE_NAMES:
        raise KeyError(name)
    torch.manual_seed(0)
    module, inputs = _modules()[name]
    with torch.no_grad():  # non-trivial norm weights give realistic quantization ranges
        for m in module.modules():
            if isinstance(m, (torch.nn.LayerNorm, torch.nn.RMSNorm)):
                m.weight.uniform_(0.5, 1.5)
    return Probe(name, module.eval(), inputs)


def _w4_layer_norm(gm: Any) -> None:
    """Annotate every layer_norm with 16-bit activations and a 4-bit per-tensor weight."""
    import torch
    from executorch.backends.qualcomm.quantizer.qconfig import get_16a4w_qnn_ptq_config
    from torchao.quantization.pt2e import MinMaxObserver
    from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

    cfg = get_16a4w_qnn_ptq_config(act_observer=MinMaxObserver)
    targets = {torch.ops.aten.layer_norm.default, torch.ops.aten.native_layer_norm.default}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in targets:
            continue
        qmap = {node.args[0]: cfg.input_activation}
        if len(node.args) > 2 and node.args[2] is not None:
            qmap[node.args[2]] = cfg.weight
        if len(node.args) > 3 and node.args[3] is not None:
            qmap[node.args[3]] = cfg.bias
        node.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map=qmap, output_qspec=cfg.output_activation, _annotated=True)


def make_quantizer(fmt: str, soc: str, probe: Probe, graph: Any) -> Any:
    """ExecuTorch's QnnQuantizer for `fmt` on `soc`, set up for this probe's graph."""
    import torch
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from torchao.quantization.pt2e import MinMaxObserver

    quantizer = QnnQuantizer(soc_model=getattr(QcomChipset, soc))
    quantizer.set_default_quant_config(getattr(QuantDtype, "use_" + fmt), is_linear_per_channel=True,
                                       is_conv_per_channel=True, act_observer=MinMaxObserver)
    if fmt == "16a4w_block":
        blocks: dict[str, tuple[int, ...]] = {}
        for node in graph.graph.nodes:
            if node.target == torch.ops.aten.linear.default:
                blocks[node.name] = (1, _BLOCK)
            elif node.target == torch.ops.aten.conv2d.default:
                blocks[node.name] = (1, _BLOCK, 1, 1)
        quantizer.set_block_size_map(blocks)
    if probe.name == "layer_norm_w4":
        quantizer.add_custom_quant_annotations([_w4_layer_norm])
    return quantizer
