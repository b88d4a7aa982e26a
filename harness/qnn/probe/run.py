"""Measure the HTP arch table: lower every probe at every format for one SoC per arch, in child
processes on the host QAIRT libraries, and classify QNN's answer with harness/qnn/log.py.

One child per SoC lowers every (format, probe) in turn (harness/qnn/probe/child.py: importing
torch and ExecuTorch costs more than a lowering); its output is cut into one section per
(format, probe) at the child's markers. A child that dies (a signal, a timeout) gives the probe
it was on that verdict; the probes after it run in a fresh child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError
from harness.hostfiles import child_pythonpath
from harness.qnn.arch_limits import ArchCell
from harness.qnn.host import HostQnn
from harness.qnn.log import classify_qnn_log
from harness.qnn.probe.child import BEGIN, RESULT
from harness.soc import lookup

# One SoC per arch (harness/soc.py): SA8295 is the automotive v68 part the seed failed on.
SOC_OF_ARCH: dict[str, str] = {"v68": "SA8295", "v69": "SM8450", "v73": "SM8550", "v75": "SM8650", "v79": "SM8750"}
_QNN_LINES_KEPT = 4


@dataclass(frozen=True)
class Batch:
    soc: str
    fmts: tuple[str, ...]
    ops: tuple[str, ...]

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((f, o) for f in self.fmts for o in self.ops)

    @property
    def arch(self) -> str:
        info = lookup(self.soc)
        if info is None:
            raise HarnessError(f"SoC {self.soc!r} is not in harness/soc.py's table")
        return info.htp_arch


@dataclass(frozen=True)
class ChildRun:
    output: str
    exit_code: int | None  # None: killed at the timeout
    timed_out: bool = False


def _sections(output: str) -> dict[tuple[str, str], tuple[str, dict[str, Any] | None]]:
    """(format, op) -> (its log section, its RESULT object or None when the child died inside it)."""
    out: dict[tuple[str, str], tuple[str, dict[str, Any] | None]] = {}
    key: tuple[str, str] | None = None
    buf: list[str] = []
    for line in output.splitlines():
        if line.startswith(BEGIN):
            fmt, _, op = line[len(BEGIN):].strip().partition(" ")
            key, buf = (fmt, op), []
        elif line.startswith(RESULT) and key is not None:
            out[key] = ("\n".join(buf), json.loads(line[len(RESULT):]))
            key = None
        elif key is not None:
            buf.append(line)
    if key is not None:
        out[key] = ("\n".join(buf), None)
    return out


def _built(result: dict[str, Any]) -> bool:
    """Lowered, in a QNN delegate, and nothing but the q/dq glue left on the CPU."""
    return bool(result.get("lowered")) and int(result.get("delegates", 0)) >= 1 and not result.get("cpu_ops")


def _cell(batch: Batch, fmt: str, op: str, section: str, result: dict[str, Any] | None,
          exit_code: int | None) -> ArchCell:
    if result is not None and _built(result):
        return ArchCell(op, fmt, batch.arch, batch.soc, True)
    # a finished probe's section is judged as a failed lowering; a dead child's by its exit code
    verdict = classify_qnn_log(section, exit_code if result is None else 1, table=None)
    message = verdict.message
    if result is not None and result.get("lowered") and result.get("cpu_ops") and not verdict.failure:
        message = f"lowered, but left on the CPU: {', '.join(result['cpu_ops'])}"
    elif not verdict.failure and result is not None:
        message = f"not built: {result.get('error', 'no delegate')}"
    lines = tuple(ln for ln in verdict.last_lines if "<E>" in ln or "stage" in ln)[:_QNN_LINES_KEPT]
    return ArchCell(op, fmt, batch.arch, batch.soc, False,
                    verdict.failure.value if verdict.failure else "unclassified", verdict.needed_arch,
                    message + ("" if not lines else " | " + " | ".join(lines)))


def run_child(batch: Batch, qnn: HostQnn, timeout: float) -> ChildRun:
    """One child in a neutral temp cwd (QNN drops files into the cwd), QNN env for it alone."""
    env = qnn.child_env(os.environ)
    env["PYTHONPATH"] = child_pythonpath(env.get("PYTHONPATH"))
    cmd = [sys.executable, "-m", "harness.qnn.probe.child", "--soc", batch.soc, "--format", ",".join(batch.fmts),
           "--ops", ",".join(batch.ops)]
    with tempfile.TemporaryDirectory(prefix="qnn-probe-") as cwd:
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired as exc:  # subprocess.run killed its own child
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return ChildRun(out + f"\ntimed out after {timeout:.0f} s", None, True)
    return ChildRun(p.stdout, p.returncode)


def measure_batch(batch: Batch, qnn: HostQnn, timeout: float,
                  runner: Callable[[Batch, HostQnn, float], ChildRun] = run_child) -> list[ArchCell]:
    cells: list[ArchCell] = []
    todo = list(batch.pairs)
    while todo:
        # the rest of this SoC's (format, op) pairs: a child per format left, all its ops
        fmt = todo[0][0]
        ops = tuple(o for f, o in todo if f == fmt)
        run = runner(Batch(batch.soc, (fmt,), ops) if len(todo) < len(batch.pairs) else batch, qnn, timeout)
        sections = _sections(run.output)
        done = 0
        for f, op in todo:
            if (f, op) not in sections:
                break
            section, result = sections[(f, op)]
            cells.append(_cell(batch, f, op, section, result, 124 if run.timed_out else run.exit_code))
            done += 1
            if result is None:  # the child died in this probe: the rest get a fresh child
                break
        if done == 0:  # died before any probe began: nothing to attribute, say so
            raise HarnessError(f"the probe child for {batch.soc} ({fmt}) ended before its first probe "
                               f"(exit {run.exit_code}): {run.output.strip().splitlines()[-1:]}")
        todo = todo[done:]
    return cells


def measure(batches: Sequence[Batch], qnn: HostQnn, *, jobs: int = 2, timeout: float = 1200.0,
            progress: Callable[[Batch, list[ArchCell]], None] | None = None) -> list[ArchCell]:
    """Every batch, at most `jobs` children at once (2 by default: the lowering is CPU-bound)."""
    if not 1 <= jobs <= 2:
        raise HarnessError(f"--jobs {jobs}: use 1 or 2 (each child lowers with torch on the CPU)")

    def one(b: Batch) -> list[ArchCell]:
        cells = measure_batch(b, qnn, timeout)
        if progress:
            progress(b, cells)
        return cells

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return [c for cells in pool.map(one, batches) for c in cells]
