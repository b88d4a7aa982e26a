"""The quantization check of a whole export folder, as the suites and the night run it: which
graph carries the activation ranges (the CPU LLM config's `llm_model`, normally `llm.mnn`, read
through harness/mnn_graph.py), whether the export has activation quantization at all, and a
verdict that names the blocks and the fix (docs/mnn-export-layout.md#activation-quantization)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.checks.quant.analysis import analyze
from harness.checks.quant.report import INT_KIND_TEXT, QuantKind, QuantReport
from harness.errors import ArtifactError
from harness.export import open_export
from harness.mnn_graph import load_graph_json
from harness.pairs import reference_of

# The exporter's switches that write activation ranges (export_args.json).
_ACT_QUANT_FLAGS = ("smooth", "omni")

FIX = ("fix: give each MLP Mul output its own calibrated range (the product's, as its down_proj input "
       "has, never an operand's; at least what its operands' ranges give, as for the block above), strip "
       "quantInfo from integer tensors, convert llm.mnn.json back to llm.mnn and rerun generate_llm_qnn.py "
       "(python -m harness.checks.quant llm.mnn lists every block)")


@dataclass(frozen=True)
class ExportQuant:
    """What the check of one export found: `skip_reason` set when there is nothing to check."""

    graph: Path | None
    report: QuantReport | None = None
    skip_reason: str = ""
    errors: tuple[str, ...] = field(default=())  # one line per failing kind, blocks named

    @property
    def passed(self) -> bool:
        return not self.skip_reason and not self.errors

    def message(self) -> str:
        if self.skip_reason:
            return self.skip_reason
        if self.report is None:
            return ""
        head = (f"activation quantization of {self.graph}: {self.report.quantized_tensors} of "
                f"{self.report.total_tensors} tensors carry quantInfo")
        if not self.errors:
            return head + f"; {self.report.mlp_mul_total} MLP Mul ranges calibrated, no integer tensor quantized"
        return "\n".join([head + ":", *(f"  - {e}" for e in self.errors), FIX])


def llm_graph_of(export_dir: Path) -> Path:
    """The graph the CPU LLM config runs (`llm_model`, default llm.mnn): the one whose
    extraTensorDescribe holds the ranges (a QNN config's llm_model is the NPU stub)."""
    folder = open_export(export_dir)
    name = "llm.mnn"
    try:
        ref = reference_of(folder.pairs)
        if ref is not None:
            name = str(folder.config(folder.pairs[ref]).data.get("llm_model") or name)
    except ArtifactError:
        pass  # no readable config: the default name, as the runtime would use
    return folder.root / name


def _exported_without_act_quant(export_dir: Path) -> str:
    args = export_dir / "export_args.json"
    try:
        data = json.loads(args.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""  # no record of the export's switches: the graph itself decides
    if isinstance(data, dict) and not any(data.get(k) for k in _ACT_QUANT_FLAGS):
        return (f"{export_dir.name} was exported without --smooth/--omni (export_args.json): its llm.mnn "
                "carries no activation quantization to check")
    return ""


def _blocks(layers: list[int | None]) -> str:
    nums = sorted({n for n in layers if n is not None})
    if not nums:
        return ""
    runs: list[str] = []
    start = prev = nums[0]
    for n in nums[1:]:
        if n != prev + 1:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            start = n
        prev = n
    runs.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(runs)


def _errors(report: QuantReport) -> tuple[str, ...]:
    out: list[str] = []
    muls = report.mlp_muls
    inherited = [m for m in muls if m.inherited_from is not None]
    if inherited:
        ex = inherited[0]
        derived = f"; e.g. block {ex.layer}: {ex.output} = {ex.inherited_from}" + (
            f", its operands' ranges give [{ex.derived_min:.4g}, {ex.derived_max:.4g}]"
            if ex.derived_min is not None and ex.derived_max is not None else "")
        out.append(f"MLP Mul range inherited from an operand in {len(inherited)} of {len(muls)} blocks "
                   f"(blocks {_blocks([m.layer for m in inherited])}){derived}")
    missing = [m for m in muls if m.output_params is None]
    if missing:
        out.append(f"MLP Mul without quantInfo in blocks {_blocks([m.layer for m in missing])}")
    mismatch = [m for m in muls if m.down_proj_agrees is False and m.output_params is not None]
    if mismatch:
        out.append(f"down_proj input disagrees with the Mul output in blocks {_blocks([m.layer for m in mismatch])}")
    if report.integer_tensors_quantized:
        kinds = ", ".join(f"{c.quantized} {INT_KIND_TEXT[k]}" for k, c in report.integer_by_kind.items() if c.quantized)
        out.append(f"{report.integer_tensors_quantized} integer tensors quantized ({kinds})")
    shown = {QuantKind.MLP_MUL_INHERITED, QuantKind.MLP_MUL_MISSING, QuantKind.DOWN_PROJ_MISMATCH,
             QuantKind.INTEGER_QUANTIZED}
    out += [f"[{f.kind}] {f.message}" for f in report.findings if f.is_error and f.kind not in shown]
    return tuple(out)


def check_export_quant(export_dir: Path | str) -> ExportQuant:
    """Check the activation quantization an export's LLM graph carries. Skipped (with the reason)
    when the export has none; ArtifactError when the graph cannot be read."""
    export_dir = Path(export_dir)
    graph_path = llm_graph_of(export_dir)
    why = _exported_without_act_quant(export_dir)
    if why:
        return ExportQuant(graph_path, skip_reason=why)
    if not graph_path.is_file():
        return ExportQuant(graph_path, skip_reason=f"{graph_path} is absent: no LLM graph to read activation "
                                                   "quantization from")
    graph = load_graph_json(graph_path)
    if not graph.get("extraTensorDescribe"):
        return ExportQuant(graph_path, skip_reason=f"{graph_path.name} carries no activation quantization (no "
                                                   "extraTensorDescribe quantInfo): nothing to check")
    try:
        report = analyze(graph, source=str(graph_path))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ArtifactError(f"{graph_path}: malformed MNN graph ({type(exc).__name__}: {exc}); re-export it") from None
    return ExportQuant(graph_path, report, errors=_errors(report))
