"""Why an export failed, from how its process ended and what it printed: QNN's own signatures
(op validation with the ops and the arch, graph finalize, ops left undelegated, a segfault while
building) are read by harness/qnn/log.py, the one home of QNN's messages; the exporter's
side is read here: killed for memory, timed out, a missing tool or SDK, a crash by signal with the
last lines, a Python traceback. An export's failure is the user's export failing, never a harness
error (docs/exports.md#failures)."""

from __future__ import annotations

import enum
import re
import signal
from dataclasses import dataclass, field
from typing import Any

from harness.catalogue import Scope, capped, load_catalogue, signal_name, signal_of
from harness.outcomes import FailureClass
from harness.qnn import QnnFailure, classify_qnn_log

_LAST_LINES = 12
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
    HOST_FAULT = FailureClass.EXPORT_HOST_FAULT.value  # a full disk, a signal from outside the harness


# The host's doing, not the inputs': a full disk or quota (errno 28 / 122, as Python and the
# C library print them), and a stop from outside the harness (a CI cancel, an operator).
_HOST_FULL_RE = re.compile(r"(?P<line>.*(?:No space left on device|Disk quota exceeded|\[Errno (?:28|122)\]).*)")
# The host's I/O or network failing under the exporter: an I/O error (errno 5), a DNS failure or a
# dropped connection fetching a config or weights (llama.py, llmexport.py fetch from the hub).
_HOST_IO_RE = re.compile(r"(?P<line>.*(?:Input/output error|\[Errno 5\]|urllib\.error\.URLError|URLError:|<urlopen error"
                         r"|socket\.gaierror|Temporary failure in name resolution|Name or service not known"
                         r"|Network is unreachable|Connection reset by peer|Connection refused|Connection timed out"
                         r"|No route to host|ConnectionError|RemoteDisconnected|ReadTimeout|ConnectTimeout).*)")
_OUTSIDE_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})


# Failures that depend on the host, not on the inputs: never kept in the export cache.
TRANSIENT = frozenset({ExportFailure.KILLED_FOR_MEMORY, ExportFailure.TIMEOUT, ExportFailure.MISSING_TOOL,
                       ExportFailure.HOST_FAULT})


@dataclass
class FailureVerdict:
    """One failed export: its class (a record's failure_class), a one-line message, the facts."""

    failure_class: str
    message: str
    last_lines: list[str] = field(default_factory=list)
    facts: dict[str, object] = field(default_factory=dict)
    cacheable: bool = True

    def to_json(self) -> dict[str, object]:
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


def _missing_tool_line(text: str) -> str | None:
    """The first line naming a missing tool or SDK (the failure catalogue's export-build lines),
    from its start to the end of what the line says is missing."""
    entries = [e for e in load_catalogue().in_scope(Scope.EXPORT_BUILD) if e.cls == ExportFailure.MISSING_TOOL]
    for line in map(capped, text.split("\n")):
        ends = [m.end() for e in entries for m in e.regex.finditer(line)]
        if ends:
            return line[:max(ends)].strip()
    return None


def classify_failure(text: str, returncode: int | None, *, timed_out: float | None = None,
                     shell: bool = False) -> FailureVerdict:
    """The verdict of an export that did not succeed (`returncode` None: it never started).
    `timed_out`: the timeout in seconds when the stage killed it for running too long."""
    tail = last_lines(text)
    if timed_out is not None:
        return FailureVerdict(ExportFailure.TIMEOUT.value, f"still running after its timeout_s of {timed_out:g} s; "
                              "killed with its process group", tail, {"timeout_s": timed_out}, cacheable=False)
    sig = signal_of(returncode, shell)
    host = _host_fault(text, sig, tail)
    if host is not None:
        return host
    qnn = _qnn_verdict(text, returncode)
    if qnn is not None:
        return qnn
    if sig == signal.SIGKILL or "MemoryError" in text:
        return FailureVerdict(ExportFailure.KILLED_FOR_MEMORY.value,
                              "killed (SIGKILL) by no one the harness knows: most likely the kernel's OOM killer; "
                              "give the host more memory or lower exports.parallel",
                              tail, {"signal": "SIGKILL"}, cacheable=False)
    missing = _missing_tool_line(text)
    if missing is not None or returncode == 127:
        line = missing or "exit code 127 (command not found)"
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


def _host_fault(text: str, sig: int | None, tail: list[str]) -> FailureVerdict | None:
    """A failure the host caused: the next build on a healthy host may pass, so it is not kept."""
    if sig in _OUTSIDE_SIGNALS:
        name = signal_name(sig)
        return FailureVerdict(ExportFailure.HOST_FAULT.value, f"ended by {name} from outside the harness "
                              "(a CI cancel, an operator); not kept in the cache", tail, {"signal": name},
                              cacheable=False)
    full = _HOST_FULL_RE.search(text)
    if full is not None:
        return FailureVerdict(ExportFailure.HOST_FAULT.value, f"the host's disk is full: {full.group('line').strip()}; "
                              "free some space and run again (not kept in the cache)", tail, cacheable=False)
    io = _HOST_IO_RE.search(text)
    if io is not None:
        return FailureVerdict(ExportFailure.HOST_FAULT.value, "the host's I/O or network failed under the exporter: "
                              f"{io.group('line').strip()}; run again when it is back (not kept in the cache)", tail,
                              cacheable=False)
    return None


def classify_not_started(error: OSError, argv0: str) -> FailureVerdict:
    """The command could not be started at all (no such program, not executable)."""
    return FailureVerdict(ExportFailure.MISSING_TOOL.value,
                          f"cannot run {argv0!r}: {error.strerror or error}; install it or fix `command:`",
                          [], cacheable=False)
