"""CLI: `python -m harness.checks.quant FILE [--json] [--baseline FILE]`; exit 0 passed, 1 findings, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.checks.quant.analysis import check_file, compare_coverage
from harness.checks.quant.report import INT_KIND_TEXT, QuantReport, fmt_params
from harness.errors import ArtifactError


def render(report: QuantReport) -> str:
    lines = [f"quantization metadata: {report.source}",
             f"  tensors with quantInfo: {report.quantized_tensors} of {report.total_tensors} "
             f"(float: {report.float_tensors_quantized} of {report.float_tensors})",
             f"  MLP Mul (gate x up): {report.mlp_mul_total} found, {report.mlp_mul_with_params} with quantInfo, "
             f"{report.mlp_mul_inherited} inherited from an operand, {report.down_proj_mismatch} disagree with "
             f"their down_proj input",
             f"  RoPE multiplies with quantInfo: {report.rope_mul_with_params} of {report.rope_mul_total}",
             f"  integer tensors quantized: {report.integer_tensors_quantized} of {report.integer_tensors_total}"]
    for k, c in report.integer_by_kind.items():
        if c.total:
            lines.append(f"    {INT_KIND_TEXT[k]}: {c.quantized} of {c.total}")
    example = next((m for m in report.mlp_muls if m.inherited_from or m.down_proj_agrees is False), None)
    if example is not None:
        lines.append(f"  example, layer {example.layer}: {example.output} {fmt_params(example.output_params)}"
                     + (f" = {example.inherited_from}" if example.inherited_from else ""))
        for h in example.hops[1:]:
            lines.append(f"    -> {h.tensor} ({h.producer}) {fmt_params(h.params)}")
        if example.fallback_scale is not None:
            lines.append(f"    fallback s_a*s_b*qmax = {example.fallback_scale!r}; operand ranges give "
                         f"[{example.derived_min:.4g}, {example.derived_max:.4g}] -> scale {example.derived_scale!r}")
    errors = [f for f in report.findings if f.is_error]
    warnings = [f for f in report.findings if not f.is_error]
    for f in warnings:
        lines.append(f"  warning: {f.message}")
    if errors:
        lines.append(f"FAILED: {len(errors)} finding(s)")
        lines += [f"  - [{f.kind}] {f.message}" for f in errors]
    else:
        lines.append("PASSED")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.checks.quant",
        description="Check the activation-quantization metadata (extraTensorDescribe) of an MNN NPU export.")
    parser.add_argument("file", type=Path, help="llm.mnn.json, llm.mnn.json.gz or llm.mnn")
    parser.add_argument("--json", action="store_true", help="print one JSON object and nothing else")
    parser.add_argument("--baseline", type=Path, help="another graph to compare coverage with (e.g. before a fix)")
    args = parser.parse_args(argv)
    try:
        report = check_file(args.file)
        if args.baseline is not None:
            report.findings.extend(compare_coverage(report, check_file(args.baseline)))
    except ArtifactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print(render(report))
    return 0 if report.passed else 1
