"""The ExecuTorch suite's `localize` check (docs/localize.md): where a format's program departs from
the CPU reference, op by op, from the export's debug build (beside its program or in `debug/`).
It runs when that format's cell failed (its sibling record, as the
export's verdict reads the others) or when asked (`--localize`, a plan's `localize: true`); it runs
the export's debug program once, compares per op with ExecuTorch's Inspector and
QNN's comparator (harness.checks.localize) and records the verdict as typed evidence. The debug
program runs where the cell ran: on the emulated HTP, or on the device through ExecuTorch's
`qnn_executor_runner` (docs/localize.md#on-a-device)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from harness.checks.localize import ETRECORD, DebugFiles, debug_files_for, localize
from harness.errors import ArtifactError, ProvisionError
from harness.evidence import LocalizeEvidence, Outcome
from harness.outcomes import FailureClass
from harness.pairs import Backend, BackendPair
from harness.qnn import QnnUnavailable, find_host_qnn
from harness.report import Detail, TestRecord
from harness.runners.executorch import DebugRunFailed, run_debug_program, run_on_device
from harness.suite.executorch.checks import EtInput, host_python_env
from harness.suite.model import CheckCall
from harness.verdict import Verdict

FORMAT_CELL = "test_quant_format_runs"  # the format's cell (registry ET_FORMAT_RUNS), whose failure asks
_OWN_SCRIPTS = ("an export made by ExecuTorch's own scripts (--dump_intermediate_outputs) keeps debug.etrecord: "
                "link it as etrecord.bin and write qnn_encodings.json and debug_inputs.npz beside it "
                "(docs/localize.md#exports-made-by-executorchs-own-scripts)")


def format_cell(records: Sequence[TestRecord], quant: str) -> TestRecord | None:
    """The format's cell among the device's records (pytest's node ids end in the testcase name)."""
    name = f"{FORMAT_CELL}[{quant}]"
    found = [r for r in records if r.name.rsplit("::", 1)[-1] == name]
    return found[-1] if found else None


def _why_not(inp: EtInput, quant: str) -> tuple[str, str] | str:
    """(the cell it explains, "" when asked; the reason to run) or the reason it is skipped."""
    cell = format_cell(inp.siblings(), quant)
    if cell is not None and cell.is_bad:
        return cell.name.rsplit("::", 1)[-1], f"{quant}'s cell failed"
    if inp.localize:
        return "", "asked"
    said = "did not run" if cell is None else f"was {cell.status}"
    return (f"{quant}: its cell {said}; localization runs on a failed cell or when asked "
            "(pytest --localize, a plan's suite entry `localize: true`)")


def _debug_run(inp: EtInput, export: DebugFiles, quant: str, rec: TestRecord) -> DebugFiles:
    """The debug program run where the cell ran: the emulated HTP's pybindings, or the device's
    `qnn_executor_runner` beside the provisioned `qnn_llama_runner` (harness.runners.executorch.localize)."""
    work = inp.work / f"localize-{quant}"
    if inp.device.emulated:
        env = find_host_qnn().child_env({**os.environ, **host_python_env()})
        return run_debug_program(export, work, env, timeout_s=inp.timeout)
    runner = inp.runner
    done = run_on_device(export, work, inp.transport, runner.runtime, runner.workspace, timeout_s=inp.timeout,
                         signatures=runner.signatures)
    rec.keep(Detail.LOCALIZE_PUSH, {"files_sent": done.push.files_sent, "bytes_sent": done.push.bytes_sent,
                                    "debug_buffer_size": done.buffer_bytes})
    return done.files


def localize_format(c: CheckCall[EtInput]) -> Verdict:
    """The first op where the format's program departs from the CPU reference, where the cell ran."""
    inp, rec, quant = c.inp, c.rec, c.instance.quant or ""
    rec.backend_pair = BackendPair(Backend.QNN, variant=quant)
    why = _why_not(inp, quant)
    if isinstance(why, str):
        return Verdict.skipped(why)
    cell, _ = why
    art = inp.catalogue.qnn(quant)
    if art is None:
        return Verdict.skipped(inp.catalogue.missing_reason(quant))
    export = debug_files_for(art.folder)
    if export.missing_build():
        own = f"; {_OWN_SCRIPTS}" if (art.folder / "debug.etrecord").is_file() and not export.path(ETRECORD).is_file() else ""
        try:
            export.require_build()
        except ArtifactError as exc:
            return Verdict.skipped(f"{quant}: {exc}{own}")
    if inp.host_lane:
        return Verdict.skipped(f"{quant}: {inp.device.name} has no HTP (the host lane runs the CPU programs); "
                               "localize on a device with one, or on an emulated HTP (`htp: emulator`)")
    inp.stamp(rec, art)
    try:
        files = _debug_run(inp, export, quant, rec)
    except DebugRunFailed as exc:
        return Verdict.failed(FailureClass(exc.cls), str(exc))
    except (ArtifactError, ProvisionError, QnnUnavailable) as exc:
        return Verdict.failed(FailureClass.RUNTIME_ERROR, f"{quant}: {exc}")
    result = localize(files, quant)
    rec.put(LocalizeEvidence(result, cell=cell))
    if result.outcome is Outcome.UNDECIDABLE:
        return Verdict.failed(FailureClass.CHECK_FAILED, f"{quant}: {result.summary()}")
    if result.outcome is Outcome.DEPARTED:
        return Verdict.failed(FailureClass.DISAGREE, f"{quant} against the CPU reference per op: {result.summary()}")
    return Verdict.passed(f"{quant} against the CPU reference per op: {result.summary()}")
