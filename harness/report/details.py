"""What a record's `extras` may still hold beside its typed evidence (harness.evidence): a closed
list, each key with the reason it is free-form. Nothing here is shown by a report (what a report
shows is a typed family); these stay in the record's JSON line for whoever reads it, and a new key
is a new member here, with its reason. Written through `TestRecord.keep` alone; the record's own
bookkeeping (`warning`, `checked_elsewhere`, `instrument`) is read by records.py."""

from __future__ import annotations

from enum import StrEnum


class Detail(StrEnum):
    # the record's verdict's own words (TestRecord.set_verdict), read by records.py
    WARNING = "warning"  # a passing record's RecordWarning
    CHECKED_ELSEWHERE = "checked_elsewhere"  # a verdict decided by another testcase (Verdict.deferred)
    INSTRUMENT = "instrument"  # which export instrument a record is (the export's verdict reads its line)
    # lab bookkeeping the message already says in words
    FACTS = "facts"  # lab::health: the device facts read when it was quarantined (the message names the one)
    DECIDED = "decided"  # an export check decided once per export, before any claim (the message says so)
    EXPORT_FAILED = "export_failed"  # a skipped testcase's failed export, by testcase name (the message says why)
    # a check's raw figures behind its message (the message carries those it judged by)
    QNN_LOG = "qnn_log"  # QNN's classified failure lines of a run log (harness.qnn.log), as JSON
    PRODUCED_TOKENS = "produced_tokens"  # the runner's own count of generated tokens
    TOKEN_AGREEMENT = "token_agreement"  # greedy tokens against the CPU reference, as JSON
    FORWARD_S = "forward_s"  # the teacher-forced forward's seconds per run
    BACKENDS = "backends"  # the backends the runner says it registered
    REFERENCE_AGREEMENT = "reference_agreement"  # logits against the CPU reference (cosine, argmax share), as JSON
    REFERENCE_RUN_S = "reference_run_s"  # the float reference's teacher-forced run, seconds
    LOAD_PREFLIGHT = "load_preflight"  # the load preflight's axis that refused a program
    SHAPE_FINDINGS = "shape_findings"  # how many shape findings were errors
    QUANTIZED_TENSORS = "quantized_tensors"  # the static quant check's counts (its line says them)
    MLP_MUL_INHERITED = "mlp_mul_inherited"  # (its first finding is the QuantFinding family)
    INTEGER_TENSORS_QUANTIZED = "integer_tensors_quantized"  # (the message names them)
    CHUNKED_METHOD = "chunked_method"  # the chunked-prefill comparison's method
    NOT_CHECKABLE = "not_checkable"  # the chunked comparisons that could not be made, explained
    CHUNKED_EQUIVALENT = "chunked_equivalent"  # the same as the verdict, kept for the JSON line's readers
    TEACHER_FORCED_NOT_CHECKABLE = "teacher_forced_not_checkable"  # why a cell had no teacher-forced comparison
    DEVICE_COMMAND = "device_command"  # what ran on the device (argv, cwd, env): harness/replay's repro bundle reads it
    BISECT_STEP = "bisect_step"  # one bisection step as harness/bisect wrote it (its message says the mark)
    BISECT = "bisect"  # the bisection's answer and versions (its message says the first bad version)
    # older nights' records read back (fixtures/records): written before a family held them
    JUNIT_PROPERTIES = "junit_properties"  # an export record's properties before ExportBuild (the same facts)
