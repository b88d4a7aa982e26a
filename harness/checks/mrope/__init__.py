"""Chunked-prefill mRoPE position checks for Qwen2-VL / Qwen3-VL style 3-axis positions.

One job per module:

- `reference`:   the (t, h, w) position of every prompt token and of decode steps, HF and MNN
                 variants, and the image grid after smart resize.
- `posdbg`:      the `[POSDBG]` dump line an instrumented runtime prints: format and parse.
- `calls`:       row accounting of a dump: warm-up lines, prefill/decode calls, real rows,
                 row inflation.
- `positions`:   compare dumps with the reference per prefill chunk and name the failure shape.
- `anchor`:      rebuild a reference from the first chunk when there is no tokenizer.
- `verdict`:     judge a captured log: pass / fail / unchecked with findings (the CLI's and
                 the pipeline's one entry, `python -m harness.checks.mrope STDOUT [--json]`).
- `equivalence`: the black-box check, chunked greedy output == one-chunk greedy output.

The facts behind them (dump format, position rules, the runtime's chunk split and its known
bugs) are in docs/posdbg.md. A simulated runtime that prints these dumps lives in the virtual
lab (`virtual_lab.mrope_sim`). Callers use `from harness.checks import mrope; mrope.<name>`.
"""

from harness.checks.mrope.anchor import reference_from_first_chunk
from harness.checks.mrope.calls import is_warmup, split_runs, warmup_count
from harness.checks.mrope.equivalence import (
    EquivalenceResult,
    assert_chunked_equivalent,
    chunked_equivalence,
)
from harness.checks.mrope.posdbg import (
    POSDBG_TAG,
    SUMMARY_KEYS,
    PosDump,
    format_posdbg,
    parse_posdbg,
    summarize_axis,
)
from harness.checks.mrope.positions import (
    CHUNK_LOCAL_BUG,
    DECODE_MISMATCH,
    LENGTH_MISMATCH,
    MALFORMED_DUMP,
    MISMATCH,
    NO_DUMPS,
    NO_REFERENCE,
    OK,
    PAST_END,
    ROW_INFLATION,
    RUN_COUNT,
    UNCHECKED_KINDS,
    PositionKind,
    assert_positions_ok,
    check_position_log,
    check_positions,
    position_finding,
)
from harness.checks.mrope.reference import (
    AXIS_NAMES,
    DecodeRule,
    Image,
    Positions,
    Segment,
    Text,
    Variant,
    image_llm_grid,
    image_spans,
    reference_positions,
    smart_resize,
)
from harness.checks.mrope.verdict import PositionVerdict, judge_log

__all__ = [
    "AXIS_NAMES", "CHUNK_LOCAL_BUG", "DECODE_MISMATCH", "LENGTH_MISMATCH", "MALFORMED_DUMP", "MISMATCH",
    "NO_DUMPS", "NO_REFERENCE", "OK", "PAST_END", "POSDBG_TAG", "ROW_INFLATION", "RUN_COUNT",
    "UNCHECKED_KINDS", "PositionVerdict", "image_spans", "is_warmup", "judge_log", "warmup_count", "SUMMARY_KEYS", "DecodeRule",
    "EquivalenceResult", "Image", "PosDump", "PositionKind", "position_finding", "Positions", "Segment", "Text",
    "Variant", "assert_chunked_equivalent", "assert_positions_ok", "check_position_log",
    "check_positions", "chunked_equivalence", "format_posdbg", "image_llm_grid", "parse_posdbg",
    "reference_from_first_chunk", "reference_positions", "smart_resize", "split_runs",
    "summarize_axis",
]
