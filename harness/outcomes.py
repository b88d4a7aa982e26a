"""The one spelling of every test status, failure class and warning the harness writes.

str-valued enums: a member *is* its string, so records, JUnit properties, SQLite rows and
the HTML report keep the exact strings they always had (`"transport-error"`, ...), and a
string read back from any of them compares equal to its member. Bottom layer: imports
nothing from the harness.

A record's `failure_class` may also hold a class this module does not own: an exception's
type name for a lab entry whose setup raised (harness/lab/scheduler.py).
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """A record's status (harness/report/records.py)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"


class FailureClass(StrEnum):
    """Why a record did not pass; the classes of harness/runners/signatures.yaml are a subset."""

    # A runner's process, classified from its output (harness/runners/signatures.yaml; the
    # order of severity lives there, not here).
    TRANSPORT_ERROR = "transport-error"  # a link fault, not the model's: the lab reconnects and re-runs
    TIMEOUT = "timeout"
    CRASH = "crash"
    LIBRARY_MISSING = "library-missing"
    QNN_LIBRARY_MISSING = "qnn-library-missing"
    BINARY_MISMATCH = "binary-mismatch"
    SHAPE_ERROR = "shape-error"
    INIT_ERROR = "init-error"
    # QNN's own refusals (harness/runners/qnn_log.py, docs/qnn-failures.md#classes).
    QNN_OP_UNSUPPORTED = "qnn-op-unsupported"  # QNN's validator refused an op on this arch/format
    QNN_VERSION_MISMATCH = "qnn-version-mismatch"  # ExecuTorch and the QAIRT libraries do not fit
    RUNTIME_ERROR = "runtime-error"
    OK = "ok"  # the runner's "no failure" class
    # The checks of a (pair, prompt) (harness/pipeline.py `decide`).
    MROPE_POSITIONS = "mrope-positions"
    LOGITS_DISAGREE = "logits-disagree"
    GARBLED_ANSWERS = "garbled-answers"  # an export's: some answers garbled (their records fail), not most
    LOGITS_DIFF_ERROR = "logits-diff-error"
    GARBLED = "garbled"
    DRIFT = "drift"  # a content word of the CPU answer replaced
    DISAGREE = "disagree"  # a different answer altogether
    # Suite checks (harness/suite/) with a class of their own.
    QUANT_METADATA = "quant-metadata"  # activation quantization of llm.mnn (checks/quant)
    CHUNKED_PREFILL = "chunked-prefill"  # output depends on the prefill chunk
    # The pytest plugin, when the test itself named no class.
    CHECK_FAILED = "check-failed"
    SETUP_ERROR = "setup-error"
    # The lab (harness/lab/scheduler.py).
    QUARANTINED = "quarantined"
    BUSY = "busy"
    INTERRUPTED = "interrupted"
    INTERNAL_ERROR = "internal-error"


class RecordWarning(StrEnum):
    """A passing record's `extras["warning"]`: recorded, never a failure."""

    DRIFT = "drift"  # words added, dropped or reordered against the CPU answer
    LOGITS_DRIFT = "logits-drift"  # teacher-forced: drift, not disagreement
    # Teacher-forced: this prompt alone disagrees; the export's verdict over all its prompts
    # decides (harness/checks/teacher_forced.py): one odd prompt is not a failure.
    LOGITS_DISAGREE = "logits-disagree"
    GARBLED_ANSWERS = "garbled-answers"  # an export's: some answers garbled (their records fail), not most


# The class a signature may carry that is never a failure (harness/runners/signatures.yaml).
SIGNATURE_WARNING = "warning"
