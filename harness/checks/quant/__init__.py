"""Activation-quantization metadata of an MNN NPU export (`llm.mnn.json` / `extraTensorDescribe`).

MNN's smooth/omni quantizer annotates each calibrated op's input and output, then
`_propagate_quant_info` fills the rest by copying ranges between neighbours. Two faults
come out of that on real exports (docs/mnn-export-layout.md#activation-quantization):

- the MLP product `gate x up` (a BinaryOp MUL) is never calibrated: it gets the range of
  one operand, bit for bit, although the product's range is unrelated to either; and the
  down_proj conv input (the `pre_convert` tensor, calibrated) then disagrees with it;
- integer tensors (Shape/Rank/Size outputs, Gather indices, `position_ids`, Reshape shape
  inputs, int constants and ints computed from those) receive activation quantization.

`analyze(graph)` returns a `QuantReport` with those findings, the coverage numbers (so a fix
that silently drops quantization shows up) and, for each MLP Mul, the safe fallback scale
`s_a * s_b * qmax` (the product of the operands' extreme values over qmax).

CLI: `python -m harness.checks.quant FILE [--json] [--baseline FILE]`
(FILE: llm.mnn.json, llm.mnn.json.gz or llm.mnn). Exit 0 passed, 1 findings, 2 bad input.
"""

from harness.checks.quant.analysis import analyze, assert_quant_ok, check_file, compare_coverage, integer_tensors
from harness.checks.quant.cli import main, render
from harness.checks.quant.export import check_export_quant
from harness.checks.quant.report import INTEGER_KINDS, Hop, IntegerKindCount, MulCheck, QuantKind, QuantParams, QuantReport

__all__ = ["INTEGER_KINDS", "Hop", "IntegerKindCount", "MulCheck", "QuantKind", "QuantParams", "QuantReport",
           "analyze", "assert_quant_ok", "check_export_quant", "check_file", "compare_coverage", "integer_tensors",
           "main", "render"]
