"""Localization: the first op where QNN leaves the CPU reference (docs/localize.md). The exporter's
debug build (ExecuTorch's conventions plus the QNN encodings a saved ETRecord drops), one run with
an ETDump and a debug buffer, ExecuTorch's Inspector and QNN's SQNR comparator per op, and the
verdict: the first op in graph order under the format's threshold."""

from harness.checks.localize.evidence import Localization, OpGap, Outcome
from harness.checks.localize.judge import judge, threshold_for

__all__ = ["Localization", "OpGap", "Outcome", "judge", "threshold_for"]
