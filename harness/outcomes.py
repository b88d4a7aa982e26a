"""The one spelling of every test status, failure class and warning the harness writes, and
of a device's night outcome.

str-valued enums: a member *is* its string, so records, JUnit properties, SQLite rows and
the HTML report keep the exact strings they always had (`"transport-error"`, ...), and a
string read back from any of them compares equal to its member. Bottom layer: imports
nothing from the harness.

A record holds them typed (harness/report/records.py) and as these strings only in its JSON
line, JUnit and SQLite. An older night named a lab entry's setup fault by its exception's type;
read back, that is a `SETUP_ERROR` (records.failure_class_of).
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
    """Why a record did not pass; every class of the failure catalogue (harness/catalogue/lines.yaml) is one."""

    # A runner's process, classified from its output (harness/catalogue/lines.yaml; the
    # order of severity lives there, not here).
    TRANSPORT_ERROR = "transport-error"  # a link fault, not the model's: the lab reconnects and re-runs
    TIMEOUT = "timeout"
    CRASH = "crash"
    LIBRARY_MISSING = "library-missing"
    QNN_LIBRARY_MISSING = "qnn-library-missing"
    BINARY_MISMATCH = "binary-mismatch"
    SHAPE_ERROR = "shape-error"
    INIT_ERROR = "init-error"
    # QNN's own refusals (harness/qnn/log.py, docs/qnn-failures.md#classes).
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
    CPU_FALLBACK = "cpu-fallback"  # a QNN program runs ops on the CPU beyond those expected (docs/placement.md)
    # A QNN program over its format's quality budget with every op clean: the quantization's cost,
    # not a fault (an op under its line is `disagree`; docs/executorch-reference.md#the-verdict).
    QUANT_BUDGET = "quant-budget"
    UNJUDGED = "unjudged"  # every QNN cell skipped for want of a reference, a debug build or a format
    # The pytest plugin, when the test itself named no class.
    CHECK_FAILED = "check-failed"
    SETUP_ERROR = "setup-error"
    # An export stage's build (harness/lab/exports/classify.py): the exporter's side...
    EXPORT_KILLED_FOR_MEMORY = "export-killed-for-memory"
    EXPORT_TIMEOUT = "export-timeout"
    EXPORT_MISSING_TOOL = "export-missing-tool"
    EXPORT_CRASH = "export-crash"  # a signal (segfault, abort) outside QNN's own signatures
    EXPORT_PYTHON_ERROR = "export-python-error"
    EXPORT_FAILED = "export-failed"  # a non-zero exit with no known signature
    EXPORT_NO_OUTPUT = "export-no-output"  # exit 0, but nothing was written to {out}
    EXPORT_INVALID = "export-invalid"  # exit 0, but the folder is not an export the harness can run
    EXPORT_HOST_FAULT = "export-host-fault"  # the host's doing (a full disk, a signal from outside): never cached
    # ...and QNN's own, as the export names them: "qnn-" + harness/qnn/log.py QnnFailure.
    EXPORT_QNN_OP_VALIDATION = "qnn-op-validation"
    EXPORT_QNN_GRAPH_FINALIZE = "qnn-graph-finalize"
    EXPORT_QNN_UNDELEGATED_OPS = "qnn-undelegated-ops"
    EXPORT_QNN_DEVICE_CONFIG_ABI = "qnn-device-config-abi"
    EXPORT_QNN_BUILD_SEGFAULT = "qnn-build-segfault"
    EXPORT_QNN_RUN_CRASH = "qnn-run-crash"
    EXPORT_QNN_CORRUPT_PTE = "qnn-corrupt-pte"
    EXPORT_QNN_NEWER_CONTEXT_BINARY = "qnn-newer-context-binary"
    EXPORT_QNN_OOM_KILLED = "qnn-oom-killed"
    EXPORT_QNN_TIMEOUT = "qnn-timeout"
    EXPORT_QNN_MISSING_SDK = "qnn-missing-sdk"
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


class NightOutcome(StrEnum):
    """How one device's night ended (night.json's `outcomes`, `harness lab run`'s last lines,
    the HTML report's devices)."""

    COMPLETED = "completed"  # every entry ran (its records say how each went)
    QUARANTINED = "quarantined"  # unhealthy or lost: the rest of its entries skipped
    BUSY = "busy"  # not claimed: another run held it, or the claim engine failed
    INTERRUPTED = "interrupted"  # a stop (Ctrl-C, SIGTERM) ended it
    HOST_FAULT = "host-fault"  # the lab host could not keep its results (a full disk): the rest not run


# The class a catalogue entry may carry that is never a failure (harness/catalogue/lines.yaml).
SIGNATURE_WARNING = "warning"
