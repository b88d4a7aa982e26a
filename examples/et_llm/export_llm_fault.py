"""A developer's planted fault in ExecuTorch's own LLM exporter, for the float-reference checks:
runs `executorch.extension.llm.export.export_llm` unchanged (same arguments, in this process) with
one layer's SwiGLU MUL output quantized with its operand's range (the SiLU output's observer)
instead of its own calibrated one: the seed fault of examples/et_qnn/plant_fault.py, set on the
observer after export_llm's calibration, before its `convert_pt2e`. Everything else, the float
reference included, is the healthy export's.

usage: python export_llm_fault.py --fault-layer N <export_llm's arguments>
"""

from __future__ import annotations

import argparse
import sys


def _is_observer(node) -> bool:
    return node.op == "call_module" and "activation_post_process" in str(node.target)


def swiglu_muls(prepared) -> list:
    """The MLP MULs of the prepared graph in graph order, one per layer: silu(w1 x) * w3 x, both
    operands observed, the first the output of SiLU (aten.silu, or QNN's decomposed x * sigmoid(x))."""
    import torch

    mul_ops = (torch.ops.aten.mul.Tensor, torch.mul)
    silu_ops = (torch.ops.aten.silu.default, torch.ops.aten.silu_.default, torch.nn.functional.silu)
    out = []
    for node in prepared.graph.nodes:
        if node.op != "call_function" or node.target not in mul_ops or len(node.args) != 2:
            continue
        if not all(hasattr(a, "op") and _is_observer(a) for a in node.args):
            continue
        source = node.args[0].args[0]
        if getattr(source, "target", None) in silu_ops or getattr(source, "target", None) in mul_ops:
            out.append(node)
    return out


def plant(layer: int):
    import executorch.extension.llm.export.builder as builder

    convert = builder.convert_pt2e

    def convert_with_fault(prepared, *args, **kwargs):
        muls = swiglu_muls(prepared)
        if not 0 <= layer < len(muls):
            raise SystemExit(f"export_llm_fault: layer {layer} has no SwiGLU MUL (found {len(muls)})")
        mul = muls[layer]
        own = prepared.get_submodule(str(next(u for u in mul.users if _is_observer(u)).target))
        operand = prepared.get_submodule(str(mul.args[0].target))
        print(f"export_llm_fault: layer {layer} {mul.name} range [{float(own.min_val):.3g}, {float(own.max_val):.3g}] "
              f"-> its operand's [{float(operand.min_val):.3g}, {float(operand.max_val):.3g}]", flush=True)
        own.min_val.copy_(operand.min_val)
        own.max_val.copy_(operand.max_val)
        return convert(prepared, *args, **kwargs)

    builder.convert_pt2e = convert_with_fault


def main() -> None:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--fault-layer", type=int, required=True)
    known, rest = ap.parse_known_args()
    plant(known.fault_layer)
    from executorch.extension.llm.export import export_llm

    sys.argv = [sys.argv[0], *rest]
    export_llm.main()


if __name__ == "__main__":
    main()
