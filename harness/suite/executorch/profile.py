"""The ExecuTorch suite's ETDump check: a real ETDump analysed per op with ExecuTorch's
Inspector (harness/runners/executorch/etdump.py), from the lane the device is:

* the host (no HTP): the CPU export's LLM run, 1 prefill + 4 decode calls
  (harness.hostrt.executorch.etdump);
* an emulated HTP or a device: the plain QNN program run with `--profile_level 2`
  (op_profile.py): QNN's per-op events, in cycles, kept as the record's per-op cycles for the
  history (harness/report/op_history.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness.evidence import EtdumpSummary, PlacementEvidence
from harness.outcomes import FailureClass
from harness.qnn import read_placement
from harness.report import TestRecord
from harness.runners.executorch import EtdumpReport, analyse_etdump, analyse_qnn_etdump, executorch_available
from harness.suite.executorch.checks import PROMPT, EtInput, host_python_env
from harness.suite.executorch.op_profile import NoProfile, Profiled, device_run, emulator_run
from harness.suite.model import CheckCall
from harness.verdict import Verdict

SUMMARY_KEYS = ("unit", "calls", "ops", "delegated", "backends", "not_delegated", "zero_cost", "zero_cost_decode",
                "phases", "method")


def _host_run(inp: EtInput, out: Path) -> Profiled:
    cpu = inp.catalogue.cpu_exports()
    if not cpu:
        raise NoProfile("no CPU export in --model-dir")
    art = next(iter(cpu.values()))
    assert art.pte is not None and art.tokenizer is not None
    res = inp.transport.shell([sys.executable, "-m", "harness.hostrt.executorch.etdump", "--model_path", str(art.pte),
                               "--tokenizer_path", str(art.tokenizer), "--prompt", PROMPT, "--decode_tokens", "4",
                               "--etdump_path", str(out)], timeout=inp.timeout, env=host_python_env())
    if res.exit_code != 0:
        raise RuntimeError(f"the host ETDump run failed (exit {res.exit_code}): {res.stderr[-1500:]}")
    run = json.loads(res.stdout.strip().splitlines()[-1])
    return Profiled(Path(run["etdump"]), art.etrecord, False, run["prefill_calls"],
                     run["prefill_calls"] + run["decode_calls"], art.pte)


def _judge(summary: dict[str, Any], report_ops: int, calls: int | None, delegated_backends: list[str | None],
           has_etrecord: bool) -> str | None:
    if not report_ops:
        return "the ETDump holds no op rows: was the .pte compiled with profiling (QNN profile_level >= 2)?"
    if calls is not None and summary["calls"] != calls:
        return f"{summary['calls']} calls in the ETDump, {calls} made"
    if calls is not None and calls > 1 and not (summary["phases"]["prefill"] > 0 and summary["phases"]["decode"] > 0):
        return f"prefill and decode should both cost time: {summary['phases']}"
    if has_etrecord and delegated_backends and not all(delegated_backends):
        return "delegated ops without a backend despite the ETRecord"
    return None


def _qnn_view(prof: Profiled, rec: TestRecord, *, emulated: bool) -> tuple[str | None, str]:
    """QNN's own events (runners/executorch/qnn_profile.py): per-op cycles mapped to the graph's nodes and
    the summary events, into the record; their cycles add up to the accelerator's (measured
    9,186,872 of 9,189,003, docs/executorch-runner.md#qnn-etdump). Returns (the problem or None,
    what QNN's events are: the Inspector counts its IO and summary events as delegated ops too)."""
    view = analyse_qnn_etdump(prof.etdump, prof.etrecord, clock="emulator" if emulated else None)
    rec.put(view.evidence())
    if view.profiled and prof.program is not None:
        rec.put(view.op_cycles(prof.program.name, prof.profile_level))
    op_events = [e for e in view.ops if e.io is None]
    counts = (f"{len(op_events)} QNN op events, {len(view.ops) - len(op_events)} IO, "
              f"{len(view.summary)} summary")
    if not view.profiled:
        return ("no QNN per-op events: the run asked for none (--profile_level 2 at run time, or a program "
                "lowered with profile_level=2)"), counts
    accelerator = view.summary_value("Accelerator (execute) time", "cycles")
    # The graph's IO events count too: a KV program's cache outputs cost a third of its cycles
    # (the example decoder: ops 6,995,313,039 + IO 3,445,945,712 = the accelerator's 10,441,258,751).
    ops = sum(e.total for e in view.ops)
    if accelerator and not 0.9 * accelerator <= ops <= 1.01 * accelerator:
        return f"QNN's per-op and IO cycles ({ops:.0f}) do not add up to the accelerator's ({accelerator:.0f})", counts
    return None, counts


def _place(program: Path, report: EtdumpReport, rec: TestRecord) -> None:
    """The profiled program's placement with each side's share of the time: its delegate calls
    (DELEGATE_CALL, what the method waited for) against the ops run outside them, both on
    ExecuTorch's own clock (a delegate's per-op events are its backend's, in cycles on QNN)."""
    delegated = sum(r.total for r in report.rows if r.name == "DELEGATE_CALL")  # its backend is not always named
    cpu = sum(r.total for r in report.not_delegated)
    total = delegated + cpu
    share = {"delegated": delegated / total, "cpu": cpu / total} if total > 0 else None
    rec.put(PlacementEvidence(program.name, read_placement(program), time_share=share))


def etdump_profile(c: CheckCall[EtInput]) -> Verdict:
    """A real ETDump, analysed per op with ExecuTorch's Inspector: delegated ops and their
    backend (QNN's per-op events in cycles on the emulator), the non-delegated rest by time,
    ops that cost nothing, prefill vs decode."""
    inp, rec = c.inp, c.rec
    if not executorch_available():
        return Verdict.skipped("the optional `executorch` extra is not installed: pip install 'harness[executorch]'")
    inp.stamp(rec)
    try:
        if inp.host_lane:
            prof = _host_run(inp, inp.work / "host.etdp")
        elif inp.device.emulated:
            prof = emulator_run(inp)
        else:
            prof = device_run(inp)
    except NoProfile as why:
        return Verdict.skipped(str(why))
    except RuntimeError as exc:
        return Verdict.failed(FailureClass.RUNTIME_ERROR, str(exc))
    etdump, etrecord, qnn, calls = prof.etdump, prof.etrecord, prof.qnn, prof.calls
    report = analyse_etdump(etdump, etrecord, qnn=qnn, prefill_calls=prof.prefill_calls)
    if prof.program is not None:
        _place(prof.program, report, rec)
    summary = report.to_json()
    rec.put(EtdumpSummary.of_json({k: summary[k] for k in SUMMARY_KEYS}))
    problem = _judge(summary, len(report.ops), calls, [r.backend for r in report.delegated], etrecord is not None)
    qnn_counts = ""
    if problem is None and qnn:
        problem, qnn_counts = _qnn_view(prof, rec, emulated=inp.device.emulated)
    if problem is None and inp.host_lane and "llama::custom_sdpa.out" not in summary["not_delegated"]:
        problem = f"the LLM custom ops are never delegated: {summary['not_delegated'][:10]}"
    if problem is None and inp.device.emulated and not report.delegated:
        problem = "no delegated QNN op in the ETDump of a profiled QNN program"
    if problem is not None:
        return Verdict.failed(FailureClass.CHECK_FAILED, problem)
    of_qnn = f" ({qnn_counts})" if qnn_counts else ""
    return Verdict.passed(f"{summary['ops']} ops, {summary['delegated']} delegated{of_qnn}, unit {summary['unit']}")


__all__ = ["etdump_profile"]
