"""QNN's own failures, classified from the log of a lowering or a run (docs/qnn-failures.md);
the failure lines are the failure catalogue's (harness/catalogue/lines.yaml, scope qnn-log).

The input is what a user has: the combined output of an ExecuTorch lowering script or of a run
of a QNN-delegated PTE on the host (HTP emulator) or a device, and the exit code when known
(a `[exit code: N]` trailer in the log is read when none is given). The verdict names QNN's
failure, the ops it rejected, the arch it was asked for and the arch QNN said they need, and
what builds there instead, read from the measured arch table (harness/qnn/arch_limits.py).
A log with neither a QNN failure line nor a clean end is undecidable, never called clean.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from harness.catalogue import Catalogue, Scope, capped, load_catalogue, signal_name, signal_of
from harness.errors import HarnessError
from harness.outcomes import FailureClass
from harness.qnn.arch_limits import ArchTable, op_kind, packaged_table, probe_of


class QnnFailure(enum.StrEnum):
    OP_VALIDATION = "op-validation"  # QNN's validator refused an op (QnnBackend_validateOpConfig)
    GRAPH_FINALIZE = "graph-finalize"  # graph prepare/finalize failed (err 1002)
    UNDELEGATED_OPS = "undelegated-ops"  # ops the partitioner had to delegate stayed on the CPU
    DEVICE_CONFIG_ABI = "device-config-abi"  # ExecuTorch's device config layout != the QAIRT libs'
    BUILD_SEGFAULT = "build-segfault"  # a signal ended the process while QNN was building
    RUN_CRASH = "run-crash"  # a signal ended the process while a PTE ran
    CORRUPT_PTE = "corrupt-pte"  # a truncated or damaged program or delegate blob
    NEWER_CONTEXT_BINARY = "newer-context-binary"  # a binary from a newer QAIRT than the runtime libs
    OOM_KILLED = "oom-killed"
    TIMEOUT = "timeout"
    MISSING_SDK = "missing-sdk"  # no QNN libraries, or no QNN_SDK_ROOT


# The harness's record class for each (harness/outcomes.py; docs/qnn-failures.md#classes).
FAILURE_CLASS: dict[QnnFailure, FailureClass] = {
    QnnFailure.OP_VALIDATION: FailureClass.QNN_OP_UNSUPPORTED,
    QnnFailure.UNDELEGATED_OPS: FailureClass.QNN_OP_UNSUPPORTED,
    QnnFailure.GRAPH_FINALIZE: FailureClass.RUNTIME_ERROR,
    QnnFailure.DEVICE_CONFIG_ABI: FailureClass.QNN_VERSION_MISMATCH,
    QnnFailure.NEWER_CONTEXT_BINARY: FailureClass.BINARY_MISMATCH,
    QnnFailure.BUILD_SEGFAULT: FailureClass.CRASH,
    QnnFailure.RUN_CRASH: FailureClass.CRASH,
    QnnFailure.OOM_KILLED: FailureClass.CRASH,
    QnnFailure.CORRUPT_PTE: FailureClass.INIT_ERROR,
    QnnFailure.TIMEOUT: FailureClass.TIMEOUT,
    QnnFailure.MISSING_SDK: FailureClass.QNN_LIBRARY_MISSING,
}

_EXIT_TRAILER = re.compile(r"^\[exit code: (-?\d+)\]\s*$", re.M)
# The failure lines are the catalogue's (harness/catalogue/lines.yaml, scope qnn-log); these
# read the details around them (the arch QNN names, its reason, the op it could not create) and
# tell a QNN log from another.
_ARCH_VALUE = re.compile(r"<E> \[\d+\] has incorrect Value (\d+), expected >= (\d+)\.")
_E_LINE = re.compile(r"<E> (.+?)\s*$")  # a reason: an <E> line that is no failure line of its own
_CREATE_OP = re.compile(r'<E> "(\S+)" generated: could not create op')
# QNN's own lines (its logger through ExecuTorch, its compiler stages, ExecuTorch's QNN C++ files).
_QNN_LINE = re.compile(r"\[Qnn ExecuTorch\]|<E>|<W>|^(?:Starting|Completed) stage: |graph_prepare|"
                       r"\[Qnn\w*\.cpp:\d+\]|executorch:Qnn\w*\.(?:cpp|h):")
_BUILDING = re.compile(r"\[QnnPartitioner\]|qnn_preprocess\.py|Caching is in SAVE MODE|to_edge_transform_and_lower")
_ANY_QNN = re.compile(r"\[Qnn ExecuTorch\]|QnnBackend|libQnn")
_LAST_LINES = 8


@dataclass(frozen=True)
class QnnLogVerdict:
    failure: QnnFailure | None  # None: clean
    ops: tuple[str, ...] = ()  # op kinds QNN rejected (`native_layer_norm`, `matmul`)
    arch: str | None = None  # 'v68': the arch QNN was asked for
    needed_arch: str | None = None  # 'v73': what QNN said the ops need
    builds_instead: str | None = None  # formats that build there instead (measured table)
    signal: int | None = None
    last_lines: tuple[str, ...] = ()
    message: str = ""
    decidable: bool = True
    nodes: tuple[str, ...] = ()  # the graph's node names QNN named
    exit_code: int | None = None
    table: str | None = None  # the table's provenance when builds_instead came from it

    @property
    def failure_class(self) -> FailureClass | None:
        return FAILURE_CLASS[self.failure] if self.failure else None

    def to_json(self) -> dict[str, object]:
        cls = self.failure_class
        return {"class": cls.value if cls else (FailureClass.OK.value if self.decidable else None),
                "failure": self.failure.value if self.failure else None, "decidable": self.decidable,
                "ops": list(self.ops), "nodes": list(self.nodes), "arch": self.arch,
                "needed_arch": self.needed_arch, "builds_instead": self.builds_instead, "signal": self.signal,
                "exit_code": self.exit_code, "last_lines": list(self.last_lines), "message": self.message,
                "table": self.table}


@dataclass(frozen=True)
class _QnnLines:
    """The failure catalogue's QNN-log entries, by the failure each names (file order)."""

    by_failure: dict[QnnFailure, tuple[re.Pattern[str], ...]]

    def match(self, failure: QnnFailure, line: str) -> re.Match[str] | None:
        for rx in self.by_failure.get(failure, ()):
            if m := rx.search(line):
                return m
        return None

    def hits(self, failure: QnnFailure, lines: list[str]) -> list[str]:
        return [ln.strip() for ln in lines if self.match(failure, ln)]


@lru_cache(maxsize=8)
def _qnn_view(cat: Catalogue) -> _QnnLines:
    names = {f.value for f in QnnFailure}
    found: dict[QnnFailure, list[re.Pattern[str]]] = {}
    for e in cat.in_scope(Scope.QNN_LOG):
        if e.qnn_failure not in names:
            raise HarnessError(f"{cat.where(e)}: qnn {e.qnn_failure!r} is not a QnnFailure of "
                               f"harness/qnn/log.py ({', '.join(sorted(names))})")
        failure = QnnFailure(e.qnn_failure)
        if e.cls != FAILURE_CLASS[failure].value:
            # One class per QNN failure: the record's class comes from the failure, not the line.
            raise HarnessError(f"{cat.where(e)}: class {e.cls!r} but QNN's {failure.value!r} is "
                               f"{FAILURE_CLASS[failure].value!r}; write that class")
        found.setdefault(failure, []).append(e.regex)
    return _QnnLines({f: tuple(rxs) for f, rxs in found.items()})


def _lines(text: str) -> list[str]:
    return [capped(ln.rstrip("\r")) for ln in text.splitlines() if ln.strip()]


def _exit_code(text: str, given: int | None) -> int | None:
    if given is not None:
        return given
    found = _EXIT_TRAILER.findall(text)
    return int(found[-1]) if found else None


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _arch(value: str | None) -> str | None:
    return f"v{value}" if value else None


def _last_qnn_lines(lines: list[str]) -> tuple[str, ...]:
    return tuple(ln.strip() for ln in [ln for ln in lines if _QNN_LINE.search(ln)][-_LAST_LINES:])


def _builds_instead(ops: tuple[str, ...], arch: str | None, table: ArchTable | None) -> str | None:
    """Formats the measured table built for every rejected op on that arch (`8a8w`)."""
    probes = [p for p in (probe_of(o) for o in ops) if p]
    if table is None or arch is None or not probes:
        return None
    common: list[str] | None = None
    for probe in probes:
        built = table.formats_built(probe, arch)
        common = [f for f in (common if common is not None else built) if f in built]
    return ", ".join(common) if common else None


def _reason(line: str, view: _QnnLines) -> str | None:
    """QNN's reason for refusing an op: an <E> line before the catalogue's validation line that is
    neither that line nor the backend's own wrapper of it."""
    r = _E_LINE.search(line)
    if r is None or r.group(1).startswith("QnnBackend_validateOpConfig") or view.match(QnnFailure.OP_VALIDATION, line):
        return None
    return r.group(1)


def _validation(lines: list[str], table: ArchTable | None, view: _QnnLines) -> QnnLogVerdict | None:
    nodes: list[str] = []
    reasons: list[str] = []
    arch = need = None
    for i, ln in enumerate(lines):
        m = view.match(QnnFailure.OP_VALIDATION, ln)
        if not m:
            continue
        nodes.append(m.group(1))
        for prev in reversed(lines[max(0, i - 4):i]):
            if a := _ARCH_VALUE.search(prev):
                arch, need = _arch(a.group(1)), _arch(a.group(2))
            elif (r := _reason(prev, view)) and r not in reasons:
                reasons.append(r)
    if not nodes:
        return None
    ops = _unique([op_kind(n) for n in nodes])
    instead = _builds_instead(ops, arch, table)
    where = f" on HTP {arch}" if arch else ""
    why = f" (QNN: expected >= {need[1:]}, needs {need})" if need else (f" (QNN: {reasons[0]})" if reasons else "")
    msg = f"QNN's validator rejected {', '.join(ops)}{where}{why}"
    if instead:
        msg += f"; on {arch} these ops build at {instead} ({table.provenance if table else ''})"
    return QnnLogVerdict(QnnFailure.OP_VALIDATION, ops, arch, need, instead, nodes=_unique(nodes), message=msg,
                         last_lines=tuple(ln.strip() for ln in lines if "<E>" in ln)[:_LAST_LINES],
                         table=table.provenance if instead and table else None)


def _undelegated(lines: list[str], view: _QnnLines) -> QnnLogVerdict | None:
    found = [m for m in (view.match(QnnFailure.UNDELEGATED_OPS, ln) for ln in lines) if m]
    if not found:
        return None
    nodes = _unique([m.group(1) for m in found])
    ops = _unique([m.group(2) for m in found])
    return QnnLogVerdict(QnnFailure.UNDELEGATED_OPS, ops, nodes=nodes,
                         message=f"ops left on the CPU that the QNN partitioner had to delegate: {', '.join(ops)} "
                                 f"(nodes {', '.join(nodes)})", last_lines=_last_qnn_lines(lines))


def _signal_verdict(lines: list[str], code: int | None, view: _QnnLines) -> QnnLogVerdict | None:
    sig = signal_of(code)
    oom = bool(view.hits(QnnFailure.OOM_KILLED, lines))
    if sig is None and not oom:
        return None
    last = _last_qnn_lines(lines)
    if sig == 9 or (sig is None and oom):
        return QnnLogVerdict(QnnFailure.OOM_KILLED, signal=sig, last_lines=last,
                             message="the process was killed (SIGKILL / out of memory)"
                                     + (f" after: {last[-1]}" if last else ""))
    if sig is None:
        return None
    name = signal_name(sig)
    corrupt = view.hits(QnnFailure.CORRUPT_PTE, lines)
    if corrupt:  # the loader died on the program's bytes (observed: SIGABRT in program.cpp)
        shown = _unique(corrupt + [ln.strip() for ln in lines[-2:]])[:_LAST_LINES]
        return QnnLogVerdict(QnnFailure.CORRUPT_PTE, signal=sig, last_lines=shown,
                             message=f"the PTE is truncated or corrupt: ExecuTorch's program loader died by {name} "
                                     f"at {corrupt[0]}")
    # A lowering (the AOT side: partitioner, preprocess) killed at any point is a build crash;
    # a run (a PTE deserialized, its context restored) is a run crash.
    building = any(_BUILDING.search(ln) for ln in lines)
    kind = QnnFailure.BUILD_SEGFAULT if building else QnnFailure.RUN_CRASH
    what = "while lowering to QNN" if building else "while running"
    return QnnLogVerdict(kind, signal=sig, last_lines=last,
                         message=f"killed by {name} {what}" + (f"; last QNN line: {last[-1]}" if last else ""))


def _simple(failure: QnnFailure, view: _QnnLines, lines: list[str], what: str) -> QnnLogVerdict | None:
    hits = view.hits(failure, lines)
    if not hits:
        return None
    return QnnLogVerdict(failure, last_lines=tuple(hits[:_LAST_LINES]), message=f"{what}: {hits[0]}")


def _finalize(lines: list[str], view: _QnnLines) -> QnnLogVerdict | None:
    codes = [m.group(1) for m in (view.match(QnnFailure.GRAPH_FINALIZE, ln) for ln in lines) if m]
    if not codes:
        return None
    nodes = _unique([m.group(1) for m in (_CREATE_OP.search(ln) for ln in lines) if m])
    msg = f"QNN could not finalize the graph (error {codes[-1]})"
    if nodes:
        msg += f"; op QNN could not create: {', '.join(nodes)}"
    return QnnLogVerdict(QnnFailure.GRAPH_FINALIZE, nodes=nodes, message=msg,
                         last_lines=tuple(ln.strip() for ln in lines if "<E>" in ln or "ERROR" in ln)[-_LAST_LINES:])


def classify_qnn_log(text: str, exit_code: int | None = None, *,
                     table: ArchTable | None | Literal["packaged"] = "packaged",
                     catalogue: Catalogue | None = None) -> QnnLogVerdict:
    """The verdict on one log. `table`: the arch table builds_instead is read from (the packaged
    one by default; None: none, as while the table itself is being measured). `catalogue`: the
    failure lines (the packaged harness/catalogue/lines.yaml by default)."""
    code = _exit_code(text, exit_code)
    lines = _lines(_EXIT_TRAILER.sub("", text))
    view = _qnn_view(catalogue or load_catalogue())
    verdict = _first_failure(lines, code, packaged_table() if table == "packaged" else table, view)
    if verdict is not None:
        return dataclasses.replace(verdict, exit_code=code)
    if code not in (0, None):
        return QnnLogVerdict(None, exit_code=code, decidable=False, last_lines=_last_qnn_lines(lines),
                             message=f"exit code {code} and no QNN failure line: not decidable from this log")
    if code is None:
        return QnnLogVerdict(None, decidable=False, last_lines=_last_qnn_lines(lines),
                             message="no exit code and no QNN failure line: not decidable from this log")
    if not any(_ANY_QNN.search(ln) for ln in lines):
        return QnnLogVerdict(None, exit_code=code, decidable=False,
                             message="exit code 0 but no QNN line at all: not a log of a QNN lowering or run")
    return QnnLogVerdict(None, exit_code=code, last_lines=_last_qnn_lines(lines),
                         message="clean: exit code 0 and no QNN failure line")


def _causes(lines: list[str], table: ArchTable | None, view: _QnnLines) -> QnnLogVerdict | None:
    """The failure a QNN line names: the ABI and SDK failures stop before any op is seen; a
    rejected op explains the finalize failure that follows it."""
    steps: tuple[Callable[[], QnnLogVerdict | None], ...] = (
        lambda: _simple(QnnFailure.DEVICE_CONFIG_ABI, view, lines,
                        "QNN device creation failed (ExecuTorch 1.5.1's device config does not match these "
                        "QAIRT libraries; use QAIRT 2.49.40, onnxruntime-qnn==2.5.0)"),
        lambda: _simple(QnnFailure.NEWER_CONTEXT_BINARY, view, lines,
                        "the context binary is from a newer QAIRT than the runtime libraries"),
        lambda: _simple(QnnFailure.MISSING_SDK, view, lines, "the QNN libraries could not be loaded"),
        lambda: _validation(lines, table, view),
        lambda: _undelegated(lines, view),
        lambda: _simple(QnnFailure.CORRUPT_PTE, view, lines, "the PTE is truncated or corrupt"),
        lambda: _finalize(lines, view),
    )
    for step in steps:
        verdict = step()
        if verdict is not None:
            return verdict
    return None


def _first_failure(lines: list[str], code: int | None, table: ArchTable | None,
                   view: _QnnLines) -> QnnLogVerdict | None:
    """A timeout, then a signal (it ends everything), then the cause a QNN line names. SIGABRT is
    the exception: ExecuTorch asserts on a cause it logged first (observed: a missing libQnnHtp.so,
    a damaged program), so the logged cause names it better than the abort."""
    if code == 124 or view.hits(QnnFailure.TIMEOUT, lines):
        return QnnLogVerdict(QnnFailure.TIMEOUT, last_lines=_last_qnn_lines(lines),
                             message="the process ran past its timeout and was stopped")
    sig = signal_of(code)
    if sig == signal.SIGABRT and (cause := _causes(lines, table, view)) is not None:
        return dataclasses.replace(cause, signal=sig, message=f"{cause.message} (then aborted: {signal_name(sig)})")
    return _signal_verdict(lines, code, view) or _causes(lines, table, view)


def exit_status(verdict: QnnLogVerdict) -> int:
    """0 clean, 1 a QNN failure, 2 undecidable (the CLI's exit code)."""
    if not verdict.decidable:
        return 2
    return 1 if verdict.failure else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.qnn.log",
                                 description="Classify QNN's failure from a lowering or run log. "
                                             "Exit 0 clean, 1 a failure, 2 undecidable or unreadable.")
    ap.add_argument("log", type=Path, help="the combined stdout+stderr of the lowering or run")
    ap.add_argument("--exit-code", type=int, help="the process's exit code (else a `[exit code: N]` line)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    try:
        text = args.log.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        print(f"error: {args.log}: cannot read the log ({exc.strerror or exc}); pass the captured output file",
              file=sys.stderr)
        return 2
    try:
        verdict = classify_qnn_log(text, args.exit_code)
    except HarnessError as exc:  # the failure catalogue itself is unreadable: nothing can be decided
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(verdict.to_json()))
    else:
        j = verdict.to_json()
        print(f"{j['class'] or 'undecidable'}: {verdict.message}")
        for ln in verdict.last_lines:
            print(f"  | {ln}")
    return exit_status(verdict)


def run() -> int:
    try:
        return main()
    except BrokenPipeError:  # `... | head`: the reader left; not an error worth a traceback
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps interpreter exit quiet
        return 0


if __name__ == "__main__":
    sys.exit(run())
