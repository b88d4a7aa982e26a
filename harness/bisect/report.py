"""A bisection's answer in words, as JSON (`bisect.json`) and as records: one per step
(`test_bisect_step[<testcase>@<version>]`) and one for the answer (`test_bisect[<testcase>]`),
written through the night's reporters (JUnit, the HTML page, the history)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.bisect.run import Bisection
from harness.bisect.search import Mark, Step
from harness.hostfiles import write_atomic
from harness.outcomes import FailureClass, Status
from harness.report import Detail, RecordWriter, TestRecord
from harness.verdict import Verdict

SUITE = "bisect"
RESULT_FILE = "bisect.json"


def _terms(b: Bisection) -> tuple[str, str]:
    """(what the first new version did, in words; git bisect's words for the two states)."""
    return ("fixes", "old = fails, new = passes") if b.fixes else ("introduces", "old = passes, new = fails")


def _step_of(b: Bisection, index: int) -> Step | None:
    return next((s for s in b.search.steps if s.index == index), None)


def _evidence(b: Bisection, index: int) -> str:
    step = _step_of(b, index)
    label = b.versions[index].label
    if step is None:
        given = "the good point" if (index == b.search.old) == (not b.fixes) else "the bad point"
        return f"{label}: {given} as given"
    said = (step.status.value if step.status else "") + (f" {step.failure_class}" if step.failure_class else "")
    return f"{label}: {said or step.why}" + (f": {step.message}" if step.message else "")


def answer(b: Bisection) -> str:
    """The bisection's answer in one paragraph."""
    req = b.request
    verb, terms = _terms(b)
    if b.first_new is not None:
        prev = max(i for i, m in b.search.marks().items() if m is Mark.OLD and i < b.first_new)
        return (f"{req.testcase} on {req.device}: {b.versions[b.first_new].label} is the first new version "
                f"({verb} it; {terms}); evidence: first new {_evidence(b, b.first_new)}; last old "
                f"{_evidence(b, prev)}")
    if b.undecided:
        names = ", ".join(b.versions[i].label for i in b.undecided)
        old, new = b.search.bounds()
        return (f"{req.testcase} on {req.device}: only skipped versions are left; the first new version is one of "
                f"{names}, {b.versions[new].label} (the last old is {b.versions[old].label})")
    return f"{req.testcase} on {req.device}: not decided ({b.stopped or 'no step left'})"


def to_json(b: Bisection) -> dict[str, object]:
    req = b.request
    return {"testcase": req.testcase, "device": req.device, "axis": req.axis.value,
            "versions": [{"label": v.label, "value": v.value} for v in b.versions],
            "old": b.search.old, "new": b.search.new, "fixes": b.fixes,
            "first_new": b.first_new, "undecided": b.undecided,
            "first_new_version": b.versions[b.first_new].label if b.first_new is not None else None,
            "steps": [s.to_json() for s in b.search.steps], "exports_built": b.exports_built,
            "exports_cached": b.exports_cached, "wall_s": round(b.wall_s, 2), "stopped": b.stopped,
            "answer": answer(b)}


def records(b: Bisection, run_id: str) -> list[TestRecord]:
    """One record per step and one for the answer."""
    req = b.request
    dev = req.inventory.get(req.device)
    out: list[TestRecord] = []
    for s in b.search.steps:
        rec = TestRecord(name=f"test_bisect_step[{req.testcase}@{b.versions[s.index].label}]", suite=SUITE,
                         device=req.device, soc_model=dev.soc_model, htp_arch=dev.htp_arch, model=req.axis.value,
                         duration_s=s.cost_s)
        rec.keep(Detail.BISECT_STEP, s.to_json())
        status = Status.SKIPPED if s.mark is Mark.SKIP else Status.PASSED
        seen = f"{s.status.value if s.status else ''} {s.failure_class}".strip()
        rec.set_verdict(Verdict(status, None, f"{s.mark.value}: {s.why or seen}"))
        rec.stamp(run_id=run_id)
        out.append(rec)
    summary = TestRecord(name=f"test_bisect[{req.testcase}]", suite=SUITE, device=req.device, soc_model=dev.soc_model,
                         htp_arch=dev.htp_arch, model=req.axis.value, duration_s=b.wall_s)
    summary.keep(Detail.BISECT, {k: v for k, v in to_json(b).items() if k != "steps"})
    decided = b.first_new is not None
    summary.set_verdict(Verdict(Status.PASSED if decided else Status.ERROR,
                                None if decided else FailureClass.SETUP_ERROR, answer(b)))
    summary.stamp(run_id=run_id)
    out.append(summary)
    return out


def write_results(b: Bisection, out_dir: Path, *, run_id: str, history_db: Path) -> tuple[dict[str, Path], list[str]]:
    """bisect.json, records.jsonl, and JUnit, HTML and history through the night's reporters."""
    from harness.lab import write_night_reports

    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / RESULT_FILE, json.dumps(to_json(b), indent=1))
    recs = records(b, run_id)
    with RecordWriter(out_dir / "records.jsonl") as writer:
        for rec in recs:
            writer.write(rec)
    paths, _, problems = write_night_reports(recs, out_dir, run_id=run_id, plan_name=f"bisect {b.request.testcase}",
                                             started_at=time.time() - b.wall_s, history_db=history_db)
    return {**paths, "json": out_dir / RESULT_FILE}, problems
