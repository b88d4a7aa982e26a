"""MNN's own words on placement, read into evidence (harness.evidence.MnnNpuLog; docs/placement.md#mnns-own-words).

* Run time: `MNN_QNN: Not registered type %d, %s.` / `MNN_QNN: Don't support type %d, %s.` in
  llm_demo's output or logcat (MNN's QNN backend made no kernel for the op; it runs elsewhere).
* Convert time: compilefornpu's `error = %f, max = %f for <path>` and `Failed to compile: <path>`
  (a sub-module kept on the CPU) and `<path>, Speed Compare: NPU: x ms : CPU: y ms` (kept as
  evidence), in its log.

The line formats are the failure catalogue's entries (harness/catalogue/lines.yaml, each citing
MNN's source line); this module only reads them. Where a convert log is, for an export folder:
`convert_log_of`.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.catalogue import Entry, Scope, load_catalogue
from harness.evidence import CpuFallback, MnnNpuLog, ModuleSpeed

NOT_REGISTERED, UNSUPPORTED = "mnn-qnn-op-not-registered", "mnn-qnn-op-unsupported"
MODULE_ERROR, COMPILE_FAILED = "mnn-npu-module-error", "mnn-npu-compile-failed"
SPEED, TOTAL_SPEED = "mnn-npu-speed", "mnn-npu-total-speed"
# A user's copy of compilefornpu's output, in the export folder (npu/generate_llm_qnn.py prints it).
USER_CONVERT_LOG = "compilefornpu.log"
_LOG_READ = 16 << 20  # a convert log's head is enough: compilefornpu prints these lines once per module


def _entries() -> dict[str, Entry]:
    cat = load_catalogue()
    wanted = {NOT_REGISTERED, UNSUPPORTED, MODULE_ERROR, COMPILE_FAILED, SPEED, TOTAL_SPEED}
    return {e.id: e for e in cat.in_scope(Scope.RUNNER_OUTPUT, Scope.LOGCAT, Scope.NPU_CONVERT) if e.id in wanted}


def _run_fallback(entry: Entry, m: re.Match[str], line: str) -> CpuFallback:
    kind, name = m.group(1), m.group(2)
    why = ("MNN's QNN backend has no kernel for op type" if entry.id == NOT_REGISTERED
           else "MNN's QNN kernel refused op type")
    return CpuFallback("run", name or f"type {kind}", f"{why} {kind}; it ran on the CPU", line.strip(), entry.id)


def _convert_fallback(entry: Entry, m: re.Match[str], line: str) -> CpuFallback:
    if entry.id == MODULE_ERROR:
        error, largest, path = m.group(1), m.group(2), m.group(3)
        reason = f"its NPU result's largest error {error} is over 0.1 of its largest value {largest}"
    else:
        path, reason = m.group(1), "the NPU run gave a different number of outputs"
    return CpuFallback("convert", path, f"compilefornpu kept it on the CPU: {reason}", line.strip(), entry.id)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def read_npu_log(run_output: str, convert_log: Path | None = None) -> MnnNpuLog:
    """The fallbacks and speeds in a run's output (stdout and logcat) and, when given, compilefornpu's log."""
    entries = _entries()
    falls: list[CpuFallback] = []
    for line in run_output.splitlines():
        for eid in (NOT_REGISTERED, UNSUPPORTED):
            if (m := entries[eid].regex.search(line)) is not None:
                falls.append(_run_fallback(entries[eid], m, line))
                break
    speeds: list[ModuleSpeed] = []
    total: tuple[float | None, float | None] = (None, None)
    text = _read(convert_log) if convert_log is not None else ""
    for line in text.splitlines():
        if (m := entries[SPEED].regex.search(line)) is not None:
            npu, cpu = _number(m.group(2)), _number(m.group(3))
            if npu is not None and cpu is not None:
                speeds.append(ModuleSpeed(m.group(1).strip(), npu, cpu))
        elif (m := entries[TOTAL_SPEED].regex.search(line)) is not None:
            total = (_number(m.group(1)), _number(m.group(2)))
        else:
            for eid in (MODULE_ERROR, COMPILE_FAILED, NOT_REGISTERED, UNSUPPORTED):
                if (m := entries[eid].regex.search(line)) is not None:
                    maker = _convert_fallback if eid in (MODULE_ERROR, COMPILE_FAILED) else _run_fallback
                    found = maker(entries[eid], m, line)
                    falls.append(found if maker is _convert_fallback else
                                 CpuFallback("convert", found.what, found.reason, found.line, found.signature))
                    break
    return MnnNpuLog(tuple(_unique(falls)), tuple(speeds), total[0], total[1], str(convert_log or ""))


def _unique(falls: list[CpuFallback]) -> list[CpuFallback]:
    """Each op or module once per stage (a run prints an op's line at every resize)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in falls:
        if (f.stage, f.what) not in seen:
            seen.add((f.stage, f.what))
            out.append(f)
    return out


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(_LOG_READ).decode(errors="replace")
    except OSError:
        return ""


def convert_log_of(export: Path) -> Path | None:
    """compilefornpu's output for an export folder, where one is kept:
    1. a plan build's exporter log: the night's export stage keeps the command's whole output as
       `export.log` beside the export in its cache entry (`entries/<key>/{out/, export.log}`,
       harness/lab/exports/cache.py), and the night's exports link to `out/`;
    2. the user's copy in the export folder, `compilefornpu.log` (generate_llm_qnn.py prints
       compilefornpu's output to its stdout: `... 2>&1 | tee <model>/compilefornpu.log`).
    None: neither is there (the convert-time reasons are then unknown, not absent)."""
    from harness.lab.exports.cache import ENTRY_FILE, LOG_FILE, OUT_DIR

    real = Path(export).resolve()
    entry = real.parent
    if real.name == OUT_DIR and (entry / ENTRY_FILE).is_file() and (entry / LOG_FILE).is_file():
        return entry / LOG_FILE
    mine = Path(export) / USER_CONVERT_LOG
    return mine if mine.is_file() else None


__all__ = ["USER_CONVERT_LOG", "convert_log_of", "read_npu_log"]
