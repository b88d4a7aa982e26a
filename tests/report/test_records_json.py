"""Records are typed in memory (Status, FailureClass, BackendPair) and text in their JSON line,
whose shape did not change: a records.jsonl written before the records were typed
(fixtures/records/night-before-typed-records.jsonl, made by that day's writer) reads back
typed, and writes back line for line the same, but for the one class that day allowed
outside the vocabulary (a setup fault named by its exception's type, now a setup-error)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.evidence import KINDS, Clock, EtdumpSummary, QnnProfile, TextAgreement, Timing
from harness.outcomes import FailureClass, Status
from harness.pairs import Backend, BackendPair
from harness.report import RecordWriter, TestRecord, read_records

OLD = Path(__file__).resolve().parents[2] / "fixtures" / "records" / "night-before-typed-records.jsonl"


def test_an_old_records_file_reads_back_typed() -> None:
    recs = {r.name: r for r in read_records(OLD)}
    cell = recs["test_generation[qnn/qnn-cat]"]
    assert cell.status is Status.PASSED and cell.failure_class is None
    assert cell.backend_pair == BackendPair(Backend.QNN, Backend.QNN) and cell.warning is not None
    crash = recs["test_generation[qnn-france]"]
    assert crash.is_bad and crash.failure_class is FailureClass.CRASH and crash.backend_pair == BackendPair(Backend.QNN)
    assert recs["test_export_verdict"].backend_pair is None and recs["test_export_verdict"].cause == "logits-disagree"
    et = recs["test_quant_format_runs[16a4w]"].backend_pair
    assert et == BackendPair(Backend.QNN, variant="16a4w") and et is not None and et.is_qnn and not et.is_visual
    assert recs["matrix/smollm2#1"].status is Status.SKIPPED and recs["lab::health"].status is Status.ERROR
    setup = recs["matrix/smollm2::setup"]
    assert setup.failure_class is FailureClass.SETUP_ERROR and setup.signature == "lab:ArtifactError"


def test_an_old_records_file_writes_back_the_same_lines(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    with RecordWriter(out) as writer:
        for rec in read_records(OLD):
            writer.write(rec)
    old = [json.loads(line) for line in OLD.read_text(encoding="utf-8").splitlines()]
    new = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [sorted(d) for d in new] == [sorted(d) for d in old]  # the same keys, in every line
    for before, after in zip(old, new):
        if before["failure_class"] == "ArtifactError":
            assert after == {**before, "failure_class": "setup-error"}
        else:
            assert after == before


EXTRAS = OLD.parent / "night-before-typed-extras.jsonl"


def test_old_extras_read_back_typed_and_write_back_byte_equal() -> None:
    lines = EXTRAS.read_text(encoding="utf-8").splitlines()
    recs = [TestRecord.from_dict(json.loads(line)) for line in lines]
    assert [r.to_json() for r in recs] == lines  # byte-equal, line for line
    for r in recs:
        assert not set(r.extras) & set(KINDS), (r.name, sorted(r.extras))  # every family's key is typed
        assert r.run_id and r.lab_run.transport  # every record's bookkeeping reads back
    by = {r.name: r for r in recs}
    profile = by["test_etdump_profile"]
    assert profile.evidence.get(Timing) == Timing(Clock.EMULATOR)
    et, qnn = profile.evidence.get(EtdumpSummary), profile.evidence.get(QnnProfile)
    assert et is not None and et.unit == "cycles" and et.delegated and [b.name for b in et.backends] == ["QnnBackend"]
    assert qnn is not None and qnn.profiled and qnn.unit_label == "cycles, emulator" and qnn.top_ops
    ag = by["test_generation[qnn-cat]"].evidence.get(TextAgreement)
    assert ag is not None and ag.level and 0 <= ag.similarity <= 1 and ag.reference
    assert by["tiny[cpu]"].lab_run.retried_after and by["tiny[qnn]#1"].lab_run.repeat == 1
    assert by["matrix/tiny#1::interrupted"].lab_run.attempt == 1 and by["lab::health"].plan_entry is None


def test_a_damaged_family_stays_free_form() -> None:
    """A line this code cannot type (an older or damaged one) still reads, its detail as written."""
    line = json.loads(EXTRAS.read_text(encoding="utf-8").splitlines()[0])
    line["extras"].update(timing="sundial", run_id=7)
    rec = TestRecord.from_dict(line)
    assert rec.evidence.get(Timing) is None and rec.run_id is None
    assert rec.extras["timing"] == "sundial" and rec.extras["run_id"] == 7
    assert json.loads(rec.to_json()) == line
