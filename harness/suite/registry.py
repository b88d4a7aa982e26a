"""The suites: each one declarative list of checks (suite/model.py). `suites/<name>/` is the
pytest door onto one of them; a plan names one (`suites: - name: qwen3_vl`) for the night.

A plan's suite whose name is not registered runs MATRIX under that name: the checks that fit
any llm_demo export (activation quantization and the generation matrix), e.g. SmolLM2."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import harness.suite.checks as checks
from harness.outcomes import FailureClass
from harness.runners import QUANT_FORMATS, PromptCase, RunnerKind, default_cases
from harness.runners.executorch import UNRECORDED_QNN
from harness.suite.executorch import (
    EtInput,
    cpu_export_runs,
    etdump_profile,
    load_failure_is_classified,
    localize_format,
    nothing_unjudged,
    program_size,
    quant_format_runs,
)
from harness.suite.model import Check, Need, Scope, Suite

EXPORT_SHAPES = Check("export_shapes", Scope.EXPORT, checks.ExportInput, checks.export_shapes, groups=("static", "structural"),
                      doc="compiled QNN IO against the model's needs, from the export's own files")
QUANT_METADATA = Check("quant_metadata", Scope.EXPORT, checks.ExportInput, checks.quant_metadata,
                       needs=(Need.ACTIVATION_QUANT, Need.MNN_CONVERTER), groups=("static",),
                       doc="activation quantization of llm.mnn: Mul ranges, integer tensors")
GENERATION = Check("generation", Scope.CELL, checks.MatrixInput, checks.generation, needs=(Need.PAIR_RUNS,), marks=("qnn",),
                   doc="the (pair, prompt) verdict of pipeline.decide")
RUNTIME_SHAPE_GUARDS = Check("runtime_shape_guards", Scope.PAIR, checks.MatrixInput, checks.runtime_shape_guards,
                             needs=(Need.PAIR_RUNS,), groups=("structural",),
                             doc="no shape or graph error in the pair's run logs")
MROPE_POSITIONS = Check("mrope_positions", Scope.PAIR, checks.MatrixInput, checks.mrope_positions,
                        needs=(Need.PAIR_RUNS, Need.INSTRUMENTED_RUNTIME), owns=FailureClass.MROPE_POSITIONS,
                        groups=("structural",), doc="chunked-prefill mRoPE positions from [POSDBG] dumps")
CHUNKED_PREFILL = Check("chunked_prefill_equivalence", Scope.DEVICE, checks.DeviceInput, checks.chunked_prefill,
                        needs=(Need.CPU_CONFIG,), groups=("structural",),
                        doc="compiled chunk against one chunk, on the CPU reference")
# A VL export's CPU pair under several chunkings (runners/vl_chunks.py), run once per device.
MROPE_CHUNKED = Check("mrope_positions_chunked", Scope.DEVICE, checks.DeviceInput, checks.mrope_positions_chunked,
                      needs=(Need.CPU_CONFIG, Need.IMAGE), groups=("structural",),
                      doc="CPU pair positions: one chunk, compiled chunk, padding and non-padding chunkings")
MROPE_IMAGE_SPLIT = Check("mrope_positions_image_split", Scope.DEVICE, checks.DeviceInput, checks.mrope_positions_image_split,
                          needs=(Need.CPU_CONFIG, Need.IMAGE), groups=("structural",),
                          doc="CPU pair positions with a chunk ending inside the image (row inflation)")
SHAPES_CHUNKED = Check("runtime_shape_guards_chunked", Scope.DEVICE, checks.DeviceInput, checks.runtime_shape_guards_chunked,
                       needs=(Need.CPU_CONFIG, Need.IMAGE), groups=("structural",),
                       doc="no shape error in the CPU pair's chunked runs (DeepStack rows vs a chunk)")
EXPORT_VERDICT = Check("export_verdict", Scope.SUMMARY, checks.SummaryInput, checks.export_verdict, groups=("verdict",),
                       doc="the export's verdict over all its prompts: static quant, teacher-forced, text lines")

QWEN3_VL = Suite("qwen3_vl", (EXPORT_SHAPES, QUANT_METADATA, GENERATION, RUNTIME_SHAPE_GUARDS, MROPE_POSITIONS,
                              MROPE_CHUNKED, MROPE_IMAGE_SPLIT, SHAPES_CHUNKED, CHUNKED_PREFILL, EXPORT_VERDICT),
                 model_types=("qwen3_vl",), visual=True,
                 doc="Qwen3-VL: the visual x LLM backend matrix, shape guards, mRoPE positions")
QWEN3 = Suite("qwen3", (EXPORT_SHAPES, QUANT_METADATA, GENERATION, CHUNKED_PREFILL, EXPORT_VERDICT),
              model_types=("qwen3",),
              visual=False, doc="Qwen3 text: the LLM backend matrix")
MATRIX = Suite("matrix", (QUANT_METADATA, GENERATION, EXPORT_VERDICT),
               doc="any llm_demo export: quantization, the matrix and the export's verdict")

# The ExecuTorch suite (harness/suite/executorch/): its own runner, a check per
# quant format (skipped with quant_matrix's reason where the arch cannot build it).
ET_FORMAT_RUNS = Check("quant_format_runs", Scope.FORMAT, EtInput, quant_format_runs, marks=("qnn",),
                       groups=("qnn",), doc="each format's program through ExecuTorch's runner with the QNN "
                       "backend, against the CPU reference of the same model")
ET_CPU_EXPORTS = Check("cpu_export_runs", Scope.DEVICE, EtInput, cpu_export_runs, groups=("cpu",),
                       doc="CPU exports (XNNPACK, portable) run with the runner's own numbers adding up")
ET_LOAD_FAILURE = Check("load_failure_is_classified", Scope.DEVICE, EtInput, load_failure_is_classified,
                        groups=("cpu",), doc="the real load failure classified by its signature")
ET_PROFILE = Check("etdump_profile", Scope.DEVICE, EtInput, etdump_profile, groups=("profile",),
                   doc="a real ETDump analysed per op with ExecuTorch's Inspector")
# After the format's cell: it reads that record (a failed cell asks for it) or runs when asked.
ET_LOCALIZE = Check("localize", Scope.FORMAT, EtInput, localize_format, marks=("qnn",), groups=("localize",),
                    doc="the first op where the format's program departs from the CPU reference (debug program, "
                    "ExecuTorch's Inspector): on a failed cell or when asked")
ET_PROGRAM_SIZE = Check("program_size", Scope.FORMAT, EtInput, program_size, groups=("static",),
                        doc="each QNN format's .pte: its bytes and its QNN context binaries' share (JUnit, page, history)")
# Last: from the QNN cells' records, whether anything was judged (`unjudged` when not).
ET_JUDGED = Check("judged", Scope.DEVICE, EtInput, nothing_unjudged, marks=("qnn",), groups=("qnn", "localize"),
                  doc="the QNN cells judged something: not all skipped for want of a "
                  "reference or a debug build (unjudged)")
EXECUTORCH_QNN = Suite("executorch_qnn", (ET_FORMAT_RUNS, ET_LOCALIZE, ET_CPU_EXPORTS, ET_LOAD_FAILURE, ET_PROFILE,
                                          ET_PROGRAM_SIZE, ET_JUDGED),
                       visual=False, runner=RunnerKind.EXECUTORCH, formats=(*QUANT_FORMATS, UNRECORDED_QNN),
                       doc="ExecuTorch exports: the quant-format matrix on QNN, CPU exports, an ETDump profile")

SUITES: dict[str, Suite] = {s.name: s for s in (QWEN3_VL, QWEN3, EXECUTORCH_QNN)}


def suite_for(name: str) -> Suite:
    """The registered suite `name`, else MATRIX under that name (a plan's own label)."""
    return SUITES.get(name) or replace(MATRIX, name=name)


def other_suite_for(model_type: str) -> str | None:
    """The registered suite that fits `model_type`, to name in a skip reason."""
    return next((s.name for s in SUITES.values() if model_type in s.model_types), None)


def suite_cases(visual: bool, image: Path | None) -> list[PromptCase]:
    """The prompts of the matrix (runners/cases.py), the same for both doors."""
    return default_cases(visual, image)


def case_ids(visual: bool) -> list[str]:
    """The prompt ids the matrix parametrizes (known before any image is written)."""
    return [c.id for c in default_cases(visual, Path("image.png") if visual else None)]
