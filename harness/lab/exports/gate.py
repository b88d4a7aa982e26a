"""The night's job, seen through the export stage: a suite's testcases that need an export which
failed are skipped with "export failed: <reason>" (the export's own testcase carries the failure,
once), and a device whose SoC has no export at all runs nothing of that model."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from harness.lab.context import DeviceContext, JobFn
from harness.lab.exports.results import ExportResult
from harness.lab.exports.stage import ExportStage
from harness.outcomes import Status
from harness.report import Detail, TestRecord
from harness.suite import EXECUTORCH_QNN
from harness.verdict import Verdict


def _formats_in(rec: TestRecord) -> set[str]:
    """The words of a testcase's parameters ("test_quant_format_runs[16a4w]" -> {"16a4w"}) and of
    its backend pair ("qnn:8a8w" -> {"qnn", "8a8w"}): the formats a record is about."""
    words: set[str] = set()
    for param in re.findall(r"\[([^\]]*)\]", rec.name):
        words.update(w for w in re.split(r"[-/,:]", param) if w)
    pair = rec.backend_pair
    if pair is not None:
        words.update(w for w in (pair.llm.value, pair.variant) if w)
    return words


_LOCALIZE = EXECUTORCH_QNN.check("localize").test_name  # the check a debug build serves


def _is_localize(rec: TestRecord) -> bool:
    return rec.name.rsplit("::", 1)[-1].startswith(f"{_LOCALIZE}[")


def _skip(rec: TestRecord, failed: ExportResult) -> TestRecord:
    rec.set_verdict(Verdict.skipped(f"export failed: {failed.reason()}"))
    rec.keep(Detail.EXPORT_FAILED, failed.job.testcase)
    return rec


class ExportGate:
    """Wraps the night's job (`scheduler.run_night` does, when the plan has `exports:`). Any other
    attribute (the job's `export_checks`) is the wrapped job's."""

    def __init__(self, job: JobFn, stage: ExportStage):
        self.job, self.stage = job, stage

    def __getattr__(self, name: str) -> Any:
        return getattr(self.job, name)

    def __call__(self, ctx: DeviceContext) -> Iterator[TestRecord]:
        if self.stage.spec.build_of(ctx.entry.model.name) is None:
            return iter(self.job(ctx))
        return self._gated(ctx)

    def _gated(self, ctx: DeviceContext) -> Iterator[TestRecord]:
        mine = self.stage.of(ctx.entry.model.name, ctx.device.soc_model)
        failed = {r.job.format: r for r in mine if not r.ok}
        # A failed debug build explains only its format's localization (the program itself built).
        debug_failed = {r.job.format: r for r in self.stage.of(ctx.entry.model.name, ctx.device.soc_model, debug=True)
                        if not r.ok}
        if not any(r.ok for r in mine):
            # Nothing to run on this device: one skipped testcase per export it would have had.
            for r in mine or []:
                rec = TestRecord(name=f"{ctx.entry.id}[{r.job.format}]", suite=ctx.entry.suite.name,
                                 device=ctx.device.name, model=ctx.entry.model.name)
                yield _skip(rec, r)
            if not mine:
                rec = TestRecord(name=ctx.entry.id, suite=ctx.entry.suite.name, device=ctx.device.name,
                                 model=ctx.entry.model.name)
                rec.set_verdict(Verdict.skipped(f"not exported for {ctx.device.soc_model}: it is not among the "
                                                f"targets of {ctx.entry.model.name}'s export (exports.builds)"))
                yield rec
            return
        for rec in self.job(ctx):
            hit = next((failed[f] for f in _formats_in(rec) if f in failed), None)
            if hit is None and _is_localize(rec):
                hit = next((debug_failed[f] for f in _formats_in(rec) if f in debug_failed), None)
            yield _skip(rec, hit) if hit is not None and rec.status is not Status.PASSED else rec
