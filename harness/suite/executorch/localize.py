"""The ExecuTorch suite's `localize` check (docs/localize.md): where a format's program departs from
the CPU reference, op by op, from the export's debug build (beside its program or in `debug/`).
It runs when that format's cell failed (its sibling record, as the
export's verdict reads the others) or when asked (`--localize`, a plan's `localize: true`); it runs
the export's debug program once, compares per op with ExecuTorch's Inspector and
QNN's comparator (harness.checks.localize) and records the verdict as typed evidence. The debug
program runs where the cell ran: on the emulated HTP, or on the device through ExecuTorch's
`qnn_executor_runner` (docs/localize.md#on-a-device)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.checks.localize import ETRECORD
from harness.errors import ArtifactError, ProvisionError
from harness.evidence import Localization, LocalizeEvidence, Outcome
from harness.outcomes import FailureClass
from harness.pairs import Backend, BackendPair
from harness.qnn import QnnUnavailable
from harness.report import TestRecord
from harness.runners.executorch import DebugRunFailed
from harness.suite.executorch.checks import EtInput
from harness.suite.executorch.float_reference import localize_program
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


def _verdict(quant: str, result: Localization) -> Verdict:
    if result.outcome is Outcome.UNDECIDABLE:
        return Verdict.failed(FailureClass.CHECK_FAILED, f"{quant}: {result.summary()}")
    if result.outcome is Outcome.DEPARTED:
        return Verdict.failed(FailureClass.DISAGREE, f"{quant} against the CPU reference per op: {result.summary()}")
    return Verdict.passed(f"{quant} against the CPU reference per op: {result.summary()}")


def localize_format(c: CheckCall[EtInput]) -> Verdict:
    """The first op where the format's program departs from the CPU reference, where the cell ran."""
    inp, rec, quant = c.inp, c.rec, c.instance.quant or ""
    rec.backend_pair = BackendPair(Backend.QNN, variant=quant)
    cell = format_cell(inp.siblings(), quant)
    done = cell.evidence.get(LocalizeEvidence) if cell is not None else None
    if cell is not None and done is not None:  # the cell localized already (it has a debug build): its result
        art = inp.catalogue.qnn(quant)
        if art is not None:
            inp.stamp(rec, art)
        rec.put(LocalizeEvidence(done.result, cell=cell.name.rsplit("::", 1)[-1]))
        return _verdict(quant, done.result)
    why = _why_not(inp, quant)
    if isinstance(why, str):
        return Verdict.skipped(why)
    name, _ = why
    art = inp.catalogue.qnn(quant)
    if art is None:
        return Verdict.skipped(inp.catalogue.missing_reason(quant))
    own = f"; {_OWN_SCRIPTS}" if (art.folder / "debug.etrecord").is_file() and not (art.folder / ETRECORD).is_file() else ""
    if inp.host_lane:
        return Verdict.skipped(f"{quant}: {inp.device.name} has no HTP (the host lane runs the CPU programs); "
                               "localize on a device with one, or on an emulated HTP (`htp: emulator`)")
    inp.stamp(rec, art)
    try:
        result = localize_program(art.folder, quant, emulated=inp.device.emulated, device=inp.device.name,
                                  work=inp.work / f"localize-{quant}", timeout=inp.timeout,
                                  on_device=(inp.transport, inp.runner), rec=rec)
    except DebugRunFailed as exc:  # a named failure of the catalogue (a missing runner, skel, a small buffer)
        return Verdict.failed(FailureClass(exc.cls), str(exc))
    except (ArtifactError, ProvisionError, QnnUnavailable) as exc:
        return Verdict.failed(FailureClass.RUNTIME_ERROR, f"{quant}: {exc}")
    if isinstance(result, str):  # asked for and not done: of class `unjudged` (judged.py)
        return Verdict.skipped(f"{quant}: {result}{own}", FailureClass.UNJUDGED if inp.localize else None)
    rec.put(LocalizeEvidence(result, cell=name))
    return _verdict(quant, result)
