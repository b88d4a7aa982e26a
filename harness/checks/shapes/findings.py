"""The shape check's findings: its kinds (`ShapeKind`) on the one finding type
(harness/findings.py: where = file and key or log line, expected vs found, what to do, and the
source the compiled IO came from), and the assertion that reports them all."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from harness.findings import Finding, Severity, Where

ERROR = Severity.ERROR
WARNING = Severity.WARNING


class ShapeKind(StrEnum):
    """What a shape finding is about (compiled IO, configs, image sizes, a runtime log line)."""

    BACKEND_TYPE = "backend_type"
    BAD_JSON = "bad_json"
    BAD_LLM_CONFIG = "bad_llm_config"
    BAD_MANIFEST = "bad_manifest"
    BROADCAST = "broadcast"
    CHUNK_LIMITS = "chunk_limits"
    CHUNK_MISMATCH = "chunk_mismatch"
    CHUNK_SIZE = "chunk_size"
    COMPUTE_SHAPE = "compute_shape"
    COMPUTE_SIZE_CODE = "compute_size_code"
    CPU_GRAPH_IO = "cpu_graph_io"
    DEEPSTACK_FEATURE = "deepstack_feature"
    DEEPSTACK_MISSING = "deepstack_missing"
    DEEPSTACK_PLACEHOLDER = "deepstack_placeholder"
    DEEPSTACK_SHAPE = "deepstack_shape"
    DEEPSTACK_UNEXPECTED = "deepstack_unexpected"
    GRAPH_IO_MISSING = "graph_io_missing"
    HIDDEN_MISMATCH = "hidden_mismatch"
    IMAGE_DROPPED = "image_dropped"
    IMAGE_SIZE_MISMATCH = "image_size_mismatch"
    IMAGE_SIZE_UNFORCED = "image_size_unforced"
    IMAGE_SIZES_IO = "image_sizes_io"
    IMAGE_TOO_SMALL = "image_too_small"
    INVALID_OUTPUT = "invalid_output"
    IO_SHAPE = "io_shape"
    IO_UNKNOWN = "io_unknown"
    IO_UNREADABLE = "io_unreadable"
    LEFTOVER_BINARY = "leftover_binary"
    MERGED_EMBEDDINGS = "merged_embeddings"
    MISSING_BINARY = "missing_binary"
    MISSING_FILE = "missing_file"
    NO_OUTPUTS = "no_outputs"
    POSITION_IDS_SHAPE = "position_ids_shape"
    QNN_ERROR_CODE = "qnn_error_code"
    QNN_EXECUTE = "qnn_execute"
    QNN_KV = "qnn_kv"
    QNN_MASK = "qnn_mask"
    QNN_PLUGIN_ATTR = "qnn_plugin_attr"
    QNN_PLUGIN_SHAPE = "qnn_plugin_shape"
    QNN_RAW_SHAPE = "qnn_raw_shape"
    QNN_VALIDATE_BINARY = "qnn_validate_binary"
    TARGET_INCONSISTENT = "target_inconsistent"
    TARGET_MISMATCH = "target_mismatch"
    TARGET_UNKNOWN = "target_unknown"
    VISUAL_GUARD = "visual_guard"
    VISUAL_OUTPUT_MISSING = "visual_output_missing"


def shape_finding(kind: ShapeKind, file: str, key: str, expected: str | None, found: str | None, hint: str,
                  severity: Severity = ERROR, *, line_no: int | None = None, source: str = "") -> Finding:
    """A shape finding: in `file` at `key` (or at a log's line `line_no`, `key` the matched
    text), expected vs found, what to do, and where the compiled IO came from."""
    return Finding(kind, severity=severity, where=Where(file=file, key=key, line_no=line_no), expected=expected,
                   found=found, hint=hint, source=source)


def assert_shapes_ok(findings: Iterable[Finding], *, allow_warnings: bool = True) -> None:
    """Raise AssertionError explaining every error (and warning) finding."""
    findings = list(findings)
    bad = [f for f in findings if f.is_error or not allow_warnings]
    if not bad:
        return
    lines = [f"shape check failed: {len(bad)} problem(s)"]
    lines += [f.explain() for f in findings]
    raise AssertionError("\n".join(lines))


__all__ = ["ERROR", "WARNING", "ShapeKind", "assert_shapes_ok", "shape_finding"]
