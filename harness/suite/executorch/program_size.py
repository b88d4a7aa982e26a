"""The program_size check: each QNN format's .pte weighed (ExecuTorch's flatbuffer read by
harness.qnn.pte), its bytes and its QNN context binaries' share as evidence for JUnit, the page
and the history (harness.evidence.ProgramSize). A program that holds no QNN context binary fails:
nothing of it would run on the NPU."""

from __future__ import annotations

from harness.evidence import ProgramSize
from harness.outcomes import FailureClass
from harness.qnn import qnn_delegates
from harness.suite.executorch.checks import EtInput
from harness.suite.model import CheckCall
from harness.verdict import Verdict


def program_size(c: CheckCall[EtInput]) -> Verdict:
    quant = c.instance.quant or ""
    art = c.inp.catalogue.qnn(quant)
    if art is None or art.pte is None:
        return Verdict.skipped(c.inp.catalogue.missing_reason(quant))
    delegates = qnn_delegates(art.pte)  # PteError (a HarnessError) names the file: the check's failure
    size = ProgramSize(art.pte.name, art.pte.stat().st_size, sum(d.size for d in delegates), len(delegates))
    c.rec.put(size)
    if not delegates:
        return Verdict.failed(FailureClass.CPU_FALLBACK, f"{quant}: {size.describe()}: nothing of it runs on the NPU")
    return Verdict.passed(f"{quant}: {size.describe()}")
