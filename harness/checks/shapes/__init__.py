"""Shape guards for MNN/QNN exports: a static check of an export folder before a run and a scan
of the runtime log after it (docs/mnn-export-layout.md, docs/llm-demo-output.md#error-strings,
docs/posdbg.md#image-grid-smart-resize).

One job per module:

- `findings`: `ShapeKind` and `shape_finding` (harness/findings.py's Finding: where, expected vs found,
  what to do, IO source), `assert_shapes_ok`.
- `compiled`: the compiled QNN IO against the model's needs (positions, deepstack, chunks,
              context binaries, soc/arch target).
- `visual`:   the visual graph's outputs and image sizes (`WxH` vs `<hw>H, W</hw>`).
- `static`:   `check_export_shapes`, the whole static check of an export folder.
- `log`:      `scan_log_for_shape_errors`, upstream error strings and the team's `GUARD_*`.
- `cli`:      `python -m harness.checks.shapes EXPORT_DIR [--json] ...`.
"""

from harness.checks.shapes.cli import compiled_chunk_size, describe_io, main
from harness.checks.shapes.cpu_graphs import graph_inputs, visual_outputs
from harness.checks.shapes.findings import ERROR, WARNING, ShapeKind, assert_shapes_ok, shape_finding
from harness.checks.shapes.log import (
    GUARD_DEEPSTACK_SHAPE,
    GUARD_NO_DEEPSTACK,
    GUARD_NO_IMAGE_EMBEDS,
    VISUAL_GUARDS,
    scan_log_for_shape_errors,
)
from harness.checks.shapes.static import check_export_shapes
from harness.checks.shapes.visual import parse_hw_tags, parse_image_sizes

__all__ = ["ERROR", "GUARD_DEEPSTACK_SHAPE", "GUARD_NO_DEEPSTACK", "GUARD_NO_IMAGE_EMBEDS", "VISUAL_GUARDS",
           "WARNING", "ShapeKind", "assert_shapes_ok", "check_export_shapes", "compiled_chunk_size", "describe_io",
           "graph_inputs", "main", "parse_hw_tags", "parse_image_sizes", "scan_log_for_shape_errors", "shape_finding",
           "visual_outputs"]
