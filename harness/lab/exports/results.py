"""What one export gave (`ExportResult`) and its testcase record (`test_export[tiny-decoder-sa8295-16a4w]`):
the class and message of a failure, the log's last lines (JUnit's failure text) and its tail
(system-out), whether the cache served it (a JUnit property), where its log and folder are."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.evidence import CacheUse, ExportBuild
from harness.lab.exports.classify import FailureVerdict
from harness.lab.plan import ExportJob
from harness.outcomes import FailureClass, Status
from harness.pairs import Backend, BackendPair
from harness.report import TestRecord
from harness.verdict import Verdict

EXPORT_SUITE = "exports"
# The export stage's records are the lab host's: they run before any device is claimed.
EXPORT_HOST = "lab-host"
_TEXT_TAIL = 8000


@dataclass
class ExportResult:
    job: ExportJob
    status: Status
    key: str = ""
    cache: CacheUse = CacheUse.MISS
    folder: Path | None = None  # the export (a cache entry's out/) when it passed
    failure: FailureVerdict | None = None
    duration_s: float = 0.0  # this night's time for it (a hit's is the look-up)
    build_s: float | None = None  # what building it took (a hit's: when it was built)
    log: Path | None = None  # the night's copy of its log
    log_tail: str = ""
    argv: list[str] = field(default_factory=list)
    note: str = ""  # e.g. a corrupt cache entry that was replaced

    @property
    def ok(self) -> bool:
        return self.status is Status.PASSED

    def reason(self) -> str:
        """One line for the suites' skipped testcases: "export failed: <reason>"."""
        if self.failure is None:
            return f"{self.job.testcase} did not finish ({self.status.value})"
        return f"{self.job.testcase} {self.failure.failure_class}: {self.failure.message}"


def export_record(result: ExportResult, run_id: str) -> TestRecord:
    job = result.job
    rec = TestRecord(name=job.testcase, suite=EXPORT_SUITE, device=EXPORT_HOST,
                     soc_model=job.target.soc, htp_arch=job.target.dsp_arch, model=job.build.model,
                     backend_pair=BackendPair(Backend.QNN, variant=job.format), duration_s=round(result.duration_s, 3),
                     text=result.log_tail[-_TEXT_TAIL:])
    note = f" [{result.note}]" if result.note else ""
    what = f"{job.target.soc} {job.format}" + (" debug build" if job.debug else "")
    if result.failure is not None:
        rec.signature = f"export:{result.failure.failure_class}"
        message = f"{what}: {result.failure.message}"
        if result.cache is CacheUse.HIT:
            message += " (the export cache's verdict: these inputs failed the same way before)"
        rec.log_excerpt = "\n".join(result.failure.last_lines)
        rec.set_verdict(Verdict(result.status, FailureClass(result.failure.failure_class), message + note))
    elif result.status is Status.ERROR:
        rec.set_verdict(Verdict.error(FailureClass.INTERRUPTED, f"{what}: stopped (Ctrl-C or "
                                      f"SIGTERM) while exporting; nothing kept{note}"))
    build = ExportBuild(result.key, result.cache, job.target.soc, job.format, job.target.soc_id, job.target.dsp_arch,
                        tuple(result.argv), str(result.folder) if result.folder else None,
                        str(result.log) if result.log else None, result.build_s, job.debug,
                        dict(result.failure.facts) if result.failure else {})
    if result.failure is None and result.status is not Status.ERROR:
        rec.set_verdict(Verdict(result.status, message=f"{what}: {build.built(failed=False)}{note}"))
    rec.stamp(run_id=run_id, transport="host")
    rec.put(build)
    return rec
