"""Localization: the first op where QNN leaves the CPU reference (docs/localize.md). The exporter's
debug build (ExecuTorch's conventions plus the QNN encodings a saved ETRecord drops), one run with
an ETDump and a debug buffer, ExecuTorch's Inspector and QNN's SQNR comparator per op, and the
verdict: the first op in graph order under the format's threshold."""

from harness.checks.localize.cli import EXIT, render
from harness.checks.localize.judge import judge, threshold_for
from harness.checks.localize.layout import (
    DEBUG_BUILD_FILES,
    DEBUG_FOLDER,
    DEBUG_OUTPUT,
    DEBUG_PTE,
    ENCODINGS,
    ETDUMP,
    ETRECORD,
    INPUTS,
    REBUILD,
    DebugFiles,
    debug_buffer_size,
    debug_build_places,
    debug_files_for,
)
from harness.checks.localize.run import localize

__all__ = ["DEBUG_BUILD_FILES", "DEBUG_FOLDER", "DEBUG_OUTPUT", "DEBUG_PTE", "ENCODINGS", "ETDUMP", "ETRECORD", "EXIT",
           "INPUTS", "REBUILD", "DebugFiles", "debug_buffer_size", "debug_build_places", "debug_files_for", "judge",
           "localize", "render", "threshold_for"]
