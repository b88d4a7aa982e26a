"""Why an export failed, from how its process ended and what it printed: QNN's own signatures
(op validation with the ops and the arch, graph finalize, ops left undelegated, a segfault while
building) are read by harness/runners/qnn_log.py, the one home of QNN's messages; the exporter's
side is read here: killed for memory, timed out, a missing tool or SDK, a crash by signal with the
last lines, a Python traceback. An export's failure is the user's export failing, never a harness
error (docs/exports.md#failures)."""

from __future__ import annotations

import enum
import re
import signal
from dataclasses import dataclass, field
from typing import Any

from harness.outcomes import FailureClass
from harness.runners import QnnFailure, classify_qnn_log, signal_name, signal_of

_LAST_LINES = 12
# A tool or SDK the command needs is not there: the shell's "not found", Python's missing module,
# the loader's missing library, an exporter saying its SDK is missing.
_MISSING_TOOL_RE = re.compile(
    r"(?P<line>.*(?:command not found|: not found$|No such file or directory: '[^']+'$"
    r"|ModuleNotFoundError: No module named .*|ImportError: .*cannot open shared object file.*"
    r"|error while loading shared libraries: .*|QNN_SDK_ROOT.*(?:not set|not found|missing).*"
    r"|(?:QNN )?SDK not found.*))", re.MULTILINE | re.IGNORECASE)
_TRACEBACK_RE = re.compile(r"^Traceback \(most recent call last\):$", re.MULTILINE)
_EXCEPTION_LINE_RE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)|AssertionError)"
                                r"(?::\s*(?P<text>.*))?$", re.MULTILINE)


class ExportFailure(enum.StrEnum):
    """The exporter-side failure classes (spelled in harness/outcomes.py FailureClass, the one
    home of a record's class); QNN's own come from qnn_log as `qnn-<class>`."""

    KILLED_FOR_MEMORY = FailureClass.EXPORT_KILLED_FOR_MEMORY.value
    TIMEOUT = FailureClass.EXPORT_TIMEOUT.value
    MISSING_TOOL = FailureClass.EXPORT_MISSING_TOOL.value
    CRASH = FailureClass.EXPORT_CRASH.value  # a signal (segfault, abort) outside QNN's own signatures
    PYTHON_ERROR = FailureClass.EXPORT_PYTHON_ERROR.value
    FAILED = FailureClass.EXPORT_FAILED.value  # a non-zero exit with no known signature
    NO_OUTPUT = FailureClass.EXPORT_NO_OUTPUT.value  # exit 0, but nothing was written to {out}
    INVALID = FailureClass.EXPORT_INVALID.value  # exit 0, but the folder is not an export the harness can run


# Failures that depend on the host, not on the inputs: never kept in the export cache.
TRANSIENT = frozenset({ExportFailure.KILLED_FOR_MEMORY, ExportFailure.TIMEOUT, ExportFailure.MISSING_TOOL})


@dataclass
class FailureVerdict:
    """One failed export: its class (a record's failure_class), a one-line message, the facts."""

    failure_class: str
    message: str
    last_lines: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    cacheable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"failure_class": self.failure_class, "message": self.message, "last_lines": self.last_lines,
                "facts": self.facts, "cacheable": self.cacheable}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FailureVerdict:
        return cls(str(data["failure_class"]), str(data["message"]), list(data.get("last_lines") or []),
                   dict(data.get("facts") or {}), bool(data.get("cacheable", True)))


def last_lines(text: str, n: int = _LAST_LINES) -> list[str]:
    return [ln for ln in text.rstrip().splitlines() if ln.strip()][-n:]


def _qnn_verdict(text: str, returncode: int | None) -> FailureVerdict | None:
    """QNN's own signature in the log, when it has one the exporter side does not read better:
    a kill, a timeout and a missing SDK are the host's business and classified here."""
    verdict = classify_qnn_log(text, returncode)
    if verdict.failure is None or verdict.failure in (QnnFailure.OOM_KILLED, QnnFailure.TIMEOUT):
        return None
    if verdict.failure in (QnnFailure.BUILD_SEGFAULT, QnnFailure.RUN_CRASH):
        if not verdict.last_lines:
            return None  # no QNN line at all: the exporter's own crash (classified below)
        # An export is a build, whatever stage QNN was in when the signal came.
        name = signal_name(verdict.signal) if verdict.signal else "a signal"
        return FailureVerdict(f"qnn-{QnnFailure.BUILD_SEGFAULT.value}",
                              f"killed by {name} while QNN was building; last QNN line: {verdict.last_lines[-1]}",
                              last_lines(text), {"signal": name, "qnn_last_lines": list(verdict.last_lines)})
    if verdict.failure is QnnFailure.MISSING_SDK:
        return FailureVerdict(ExportFailure.MISSING_TOOL.value, f"the QNN SDK is missing: {verdict.message}",
                              list(verdict.last_lines) or last_lines(text), cacheable=False)
    facts = {k: v for k, v in verdict.to_json().items() if k not in ("message", "last_lines") and v not in (None, [])}
    message = verdict.message
    if verdict.nodes:  # QNN's own names of the graph's nodes it refused
        shown = ", ".join(verdict.nodes[:4]) + (f" and {len(verdict.nodes) - 4} more" if len(verdict.nodes) > 4 else "")
        message += f" [nodes: {shown}]"
    return FailureVerdict(f"qnn-{verdict.failure.value}", message, list(verdict.last_lines) or last_lines(text), facts)


def classify_failure(text: str, returncode: int | None, *, timed_out: float | None = None,
                     shell: bool = False) -> FailureVerdict:
    """The verdict of an export that did not succeed (`returncode` None: it never started).
    `timed_out`: the timeout in seconds when the stage killed it for running too long."""
    tail = last_lines(text)
    if timed_out is not None:
        return FailureVerdict(ExportFailure.TIMEOUT.value, f"still running after its timeout_s of {timed_out:g} s; "
                              "killed with its process group", tail, {"timeout_s": timed_out}, cacheable=False)
    qnn = _qnn_verdict(text, returncode)
    if qnn is not None:
        return qnn
    sig = signal_of(returncode, shell)
    if sig == signal.SIGKILL or "MemoryError" in text:
        return FailureVerdict(ExportFailure.KILLED_FOR_MEMORY.value,
                              "killed (SIGKILL) by no one the harness knows: most likely the kernel's OOM killer; "
                              "give the host more memory or lower exports.parallel",
                              tail, {"signal": "SIGKILL"}, cacheable=False)
    missing = _MISSING_TOOL_RE.search(text)
    if missing is not None or returncode == 127:
        line = missing.group("line").strip() if missing else "exit code 127 (command not found)"
        return FailureVerdict(ExportFailure.MISSING_TOOL.value, f"a tool or SDK is missing: {line}", tail,
                              cacheable=False)
    if sig is not None:
        name = signal_name(sig)
        return FailureVerdict(ExportFailure.CRASH.value, f"crashed with {name}; last line: {tail[-1] if tail else '-'}",
                              tail, {"signal": name})
    if _TRACEBACK_RE.search(text):
        found = list(_EXCEPTION_LINE_RE.finditer(text))
        line = found[-1].group(0).strip() if found else tail[-1] if tail else "a traceback"
        return FailureVerdict(ExportFailure.PYTHON_ERROR.value, f"the exporter raised {line}", tail)
    return FailureVerdict(ExportFailure.FAILED.value,
                          f"exit code {returncode}; last line: {tail[-1] if tail else '(no output)'}", tail)


def classify_not_started(error: OSError, argv0: str) -> FailureVerdict:
    """The command could not be started at all (no such program, not executable)."""
    return FailureVerdict(ExportFailure.MISSING_TOOL.value,
                          f"cannot run {argv0!r}: {error.strerror or error}; install it or fix `command:`",
                          [], cacheable=False)
