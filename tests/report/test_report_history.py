from harness.report.history import History, aggregate

from reportkit import night_records


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
