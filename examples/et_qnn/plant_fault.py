"""A developer's planted fault for the reference checks and their calibration: lower_decoder.py's
SwiGLU decoder with one layer's MLP MUL output quantized with its operand's range (the SiLU
output's observer) instead of its own calibrated one, MNN's activation-range bug in ExecuTorch
form (issue 33). Everything else, the reference/ included, is the healthy exporter's: the
program departs from its own float model, which is what the reference check must see.

usage: python plant_fault.py --fault-layer N <lower_decoder.py's arguments, with --mlp swiglu>
(the same as lower_decoder.py ... --plant-mul-range-fault N; with --debug-program, the debug build
carries the same fault)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lower_decoder  # noqa: E402  (the exporter beside this file)


def _is_observer(node) -> bool:
    return node.op == "call_module" and "activation_post_process" in str(node.target)


def _source(observer):
    return observer.args[0]


def mlp_muls(prepared) -> list:
    """The SwiGLU MULs of the prepared graph in graph order, one per layer: silu(gate) * up, where
    QnnQuantizer's graph has SiLU as gate * sigmoid(gate) (a MUL itself). The attention's mask
    MUL (by a constant) and SiLU's own MUL are not it."""
    import torch

    mul_ops = (torch.ops.aten.mul.Tensor, torch.mul)
    muls = []
    for node in prepared.graph.nodes:
        if node.op != "call_function" or node.target not in mul_ops or len(node.args) != 2:
            continue
        if all(hasattr(a, "op") and _is_observer(a) for a in node.args) and _source(node.args[0]).target in mul_ops:
            muls.append(node)
    return muls


def plant_mul_range(layer: int):
    """A `before_convert` hook: layer `layer`'s SwiGLU MUL output observer takes the range of its
    first operand (SiLU's output)."""

    def hook(prepared) -> None:
        muls = mlp_muls(prepared)
        if not 0 <= layer < len(muls):
            raise SystemExit(f"plant_fault: layer {layer} has no SwiGLU MUL (found {len(muls)}); use --mlp swiglu")
        mul = muls[layer]
        out_obs = next(u for u in mul.users if _is_observer(u))
        own = prepared.get_submodule(str(out_obs.target))
        operand = prepared.get_submodule(str(mul.args[0].target))
        print(f"plant_fault: layer {layer} {mul.name} range [{float(own.min_val):.3g}, {float(own.max_val):.3g}] "
              f"-> its operand's [{float(operand.min_val):.3g}, {float(operand.max_val):.3g}]")
        own.min_val.copy_(operand.min_val)
        own.max_val.copy_(operand.max_val)

    return hook


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--fault-layer", type=int, required=True)
    known, rest = ap.parse_known_args(argv)
    # lower_decoder plants it, in the program and (--debug-program) in its debug build alike
    return lower_decoder.main([*rest, "--plant-mul-range-fault", str(known.fault_layer)])


if __name__ == "__main__":
    sys.exit(main())
