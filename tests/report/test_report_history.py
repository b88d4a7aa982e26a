from reportkit import night_records

from harness.evidence import TeacherForced
from harness.report import History, aggregate


def _fill(db, speeds, crash_tonight=False):
    """Past nights at the given decode scales, then tonight."""
    with History(db) as h:
        for i, scale in enumerate(speeds):
            h.add_night(f"n{i}", night_records(decode_scale=scale, crash=False), started_at=1000.0 + i)
        h.add_night("tonight", night_records(decode_scale=speeds[-1] if not crash_tonight else 1.0,
                                             crash=crash_tonight), started_at=2000.0)


def test_aggregates_per_device_model_backend_pair():
    rows = {(r["device"], r["model"], r["backend_pair"]): r for r in aggregate(night_records())}
    cpu = rows[("oneplus13", "smollm2", "cpu")]
    assert cpu["status"] == "failed" and cpu["tests"] == 2 and cpu["failed"] == 1
    assert cpu["failure_classes"] == '["crash"]' and cpu["decode_tps"] == 12.0  # the crash has no speed
    assert rows[("oneplus13", "smollm2", "qnn")]["status"] == "passed"
    assert rows[("pixel-dead", "", "")]["failure_classes"] == '["quarantined"]'


def test_perf_drop_against_the_median_of_recent_nights(tmp_path):
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        for i, scale in enumerate([1.0, 1.02, 0.98, 1.0, 5.0]):  # one outlier night does not move the median
            h.add_night(f"n{i}", night_records(decode_scale=scale, crash=True), started_at=1000.0 + i)
        h.add_night("tonight", night_records(decode_scale=0.8, crash=True), started_at=2000.0)
        regs = h.regressions("tonight", nights=7, perf_drop_pct=15, min_nights=3)
        perf = {(r.device, r.backend_pair, r.metric) for r in regs if r.kind == "perf"}
        assert ("oneplus13", "qnn", "decode_tps") in perf and ("sa8295", "cpu", "prefill_tps") in perf
        r = next(r for r in regs if (r.device, r.backend_pair, r.metric) == ("oneplus13", "qnn", "decode_tps"))
        assert r.tonight == 32.0 and r.baseline == 40.0 and r.nights == 5 and round(r.change_pct) == -20
        assert "-20.0%" in r.describe()
        assert not [r for r in regs if r.kind == "new-failure"]  # the crash was there every night
        # Within the threshold: nothing.
        h.add_night("tonight", night_records(decode_scale=0.9, crash=True), started_at=2000.0)
        assert not [r for r in h.regressions("tonight", perf_drop_pct=15) if r.kind == "perf"]
        # Too few past nights: no perf verdict.
        assert not h.regressions("n1", min_nights=3)


def test_new_failure_class_is_flagged(tmp_path):
    db = tmp_path / "h.sqlite"
    _fill(db, [1.0, 1.0, 1.0], crash_tonight=True)
    with History(db) as h:
        regs = h.regressions("tonight", nights=7)
        new = {(r.device, r.backend_pair, r.metric) for r in regs if r.kind == "new-failure"}
        assert new == {("oneplus13", "cpu", "crash")}  # garbled and quarantined were seen before
        assert "new failure class 'crash'" in next(r for r in regs if r.kind == "new-failure").describe()


def test_history_is_one_file_reopened_and_night_replaced(tmp_path):
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        h.add_night("a", night_records(), started_at=1.0)
        h.add_night("a", night_records(), started_at=1.0)  # stored twice: replaced, not doubled
    with History(db) as h:
        assert h.nights() == [("a", 1.0)]
        assert len(h.results(["a"])) == len(aggregate(night_records()))
        trend = h.trend("oneplus13", "decode_tps")
        assert trend[("smollm2", "qnn")] == [("a", 1.0, 40.0)]


def _tf_night(kl: float, flips: int = 0, steps: int = 16) -> list:
    """A night whose QNN records carry a teacher-forced comparison with the given mean KL."""
    recs = night_records(crash=False)
    for r in recs:
        if r.backend_pair == "qnn":
            r.put(TeacherForced.of_json({"verdict": "agree", "a": "cpu", "b": "qnn", "mean_kl": kl,
                                         "nll_gap": kl * 2, "kl_used": True, "disagreements": flips,
                                         "counted_steps": steps, "first_disagreement": None}))
    return recs


def test_teacher_forced_metrics_are_stored_per_key(tmp_path):
    rows = {(r["device"], r["backend_pair"]): r for r in aggregate(_tf_night(0.015, flips=2))}
    assert rows[("oneplus13", "qnn")]["tf_mean_kl"] == 0.015
    assert rows[("oneplus13", "qnn")]["tf_disagree_rate"] == 2 / 16
    assert rows[("oneplus13", "cpu")]["tf_mean_kl"] is None
    with History(tmp_path / "h.sqlite") as h:
        h.add_night("a", _tf_night(0.015), started_at=1.0)
        row = next(r for r in h.results(["a"]) if (r.device, r.backend_pair) == ("oneplus13", "qnn"))
        assert row.number("tf_mean_kl") == 0.015 and row.number("tf_nll_gap") == 0.03


def test_a_slow_teacher_forced_drift_across_nights_is_a_regression(tmp_path):
    """Every night stays under the nightly drift threshold (KL 0.05) and moves by little more
    than a median of the last week would notice; against the oldest nights it is flagged."""
    kls = [0.015 + 0.002 * i for i in range(14)]  # 0.015 ... 0.041
    with History(tmp_path / "h.sqlite") as h:
        for i, kl in enumerate(kls[:-1]):
            h.add_night(f"n{i}", _tf_night(kl), started_at=1000.0 + i)
        h.add_night("tonight", _tf_night(kls[-1]), started_at=2000.0)
        regs = [r for r in h.regressions("tonight") if r.kind == "agreement"]
        kl = {(r.device, r.backend_pair) for r in regs if r.metric == "tf_mean_kl"}
        assert kl == {("oneplus13", "qnn"), ("sa8295", "qnn")}
        r = next(r for r in regs if r.metric == "tf_mean_kl")
        assert r.baseline == 0.017 and abs(r.tonight - 0.041) < 1e-9
        assert "rose to 0.0410 from a median of 0.0170" in r.describe()
        # A steady export: the same numbers every night, nothing flagged.
        h2 = History(tmp_path / "steady.sqlite")
        for i in range(10):
            h2.add_night(f"n{i}", _tf_night(0.015), started_at=1000.0 + i)
        assert not [r for r in h2.regressions("n9") if r.kind == "agreement"]
        h2.close()


def test_an_old_history_file_gets_the_new_columns(tmp_path):
    import sqlite3

    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE nights (night_id TEXT PRIMARY KEY, started_at REAL NOT NULL, plan TEXT NOT NULL DEFAULT '',
                             recorded_at REAL NOT NULL);
        CREATE TABLE results (night_id TEXT NOT NULL, device TEXT NOT NULL, soc TEXT NOT NULL DEFAULT '',
            arch TEXT NOT NULL DEFAULT '', model TEXT NOT NULL DEFAULT '', backend_pair TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL, tests INTEGER NOT NULL, passed INTEGER NOT NULL, failed INTEGER NOT NULL,
            skipped INTEGER NOT NULL, flaky INTEGER NOT NULL, failure_classes TEXT NOT NULL, prefill_tps REAL,
            decode_tps REAL, load_s REAL, PRIMARY KEY (night_id, device, model, backend_pair));
        INSERT INTO nights VALUES ('old', 1.0, '', 1.0);
        INSERT INTO results VALUES ('old', 'oneplus13', '', '', 'm', 'qnn', 'passed', 1, 1, 0, 0, 0, '[]', 1, 2, 3);
    """)
    con.close()
    with History(db) as h:
        h.add_night("new", _tf_night(0.02), started_at=2.0)
        rows = {r.night_id: r for r in h.results() if r.backend_pair == "qnn" and r.device == "oneplus13"}
        assert rows["old"].number("tf_mean_kl") is None and rows["new"].number("tf_mean_kl") == 0.02


def test_a_history_locked_by_another_process_is_busy_not_damaged(tmp_path):
    import sqlite3

    import pytest

    from harness.report import HistoryBusy

    path = tmp_path / "history.db"
    History(path).close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another night writing its results
    try:
        with pytest.raises(HistoryBusy, match="busy: another process") as err:
            History(path, busy_wait_s=0.2).check()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert "mv " not in str(err.value) and "not damaged" in str(err.value)
    with History(path) as hist:
        hist.check()  # whole once the other lets go
