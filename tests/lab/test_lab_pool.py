"""A lab larger than the plan's worker pool (issue 36, fault 12): threads, claims and device
work bounded by `concurrency.workers`, not the device count, and a stop that ends the night
without claiming the devices still queued."""

from __future__ import annotations

import threading
import time

from labkit import write_inventory, write_plan

from harness.inventory import load_inventory
from harness.lab import DeviceContext, lock_state, run_night
from harness.lab.claims import FileClaim
from harness.lab.plan import PlanError, load_plan
from harness.outcomes import NightOutcome
from harness.report import TestRecord

DEVICES, WORKERS = 60, 4


class Gauge:
    """The most jobs, threads and held claims seen at once while jobs run. Claims are counted where
    they are taken and given back (FileClaim.acquire / release): a sweep of lock_state over the 60
    lock files is no snapshot (a worker could give one back and take the next during the sweep and
    be counted twice; seen once in three runs)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now = self.jobs = self.threads = self.claims = self.held = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.jobs = max(self.jobs, self.now)
            self.threads = max(self.threads, threading.active_count())

    def leave(self) -> None:
        with self.lock:
            self.now -= 1

    def claimed(self, delta: int) -> None:
        with self.lock:
            self.held += delta
            self.claims = max(self.claims, self.held)

    def watch_claims(self, monkeypatch) -> None:
        acquire, release = FileClaim.acquire, FileClaim.release

        def counted_acquire(claim, *a, **k):
            device = acquire(claim, *a, **k)
            self.claimed(+1)
            return device

        def counted_release(claim):
            self.claimed(-1)
            release(claim)

        monkeypatch.setattr(FileClaim, "acquire", counted_acquire)
        monkeypatch.setattr(FileClaim, "release", counted_release)


def _lab(tmp_path, n, **plan):
    inv = load_inventory(write_inventory(tmp_path, n))
    return inv, load_plan(write_plan(tmp_path, **plan))


def test_the_pool_bounds_threads_claims_and_device_work(tmp_path, monkeypatch):
    inv, plan = _lab(tmp_path, DEVICES, concurrency={"workers": WORKERS})
    gauge = Gauge()
    gauge.watch_claims(monkeypatch)
    before = threading.active_count()

    def job(ctx: DeviceContext):
        gauge.enter()
        try:
            time.sleep(0.01)  # long enough for the pool's other workers to be in their jobs too
            yield TestRecord(name="probe", suite=ctx.entry.suite.name, device=ctx.device.name)
        finally:
            gauge.leave()

    night = run_night(plan, inv, tmp_path / "out", job, say=lambda m: None, reports=False)
    assert len(night.records()) == DEVICES and all(r.status == "passed" for r in night.records())
    assert {o.status for o in night.devices.values()} == {NightOutcome.COMPLETED}
    assert gauge.jobs <= WORKERS and 0 < gauge.claims <= WORKERS
    assert gauge.threads <= before + WORKERS


def test_a_stop_claims_no_queued_device_and_ends_the_night_at_once(tmp_path):
    n = 200
    inv, plan = _lab(tmp_path, n, concurrency={"workers": WORKERS})
    stop, started = threading.Event(), []
    lock = threading.Lock()

    def job(ctx: DeviceContext):
        with lock:
            started.append(ctx.device.name)
            if len(started) == WORKERS:
                stop.set()  # every worker busy: the other devices are queued
        ctx.transport.shell(["sleep", "300"], timeout=400)  # ended on the device by the stop
        yield TestRecord(name="sleep", suite=ctx.entry.suite.name, device=ctx.device.name)

    t0 = time.monotonic()
    night = run_night(plan, inv, tmp_path / "out", job, stop=stop, say=lambda m: None, reports=False)
    assert time.monotonic() - t0 < 60  # a hang guard; the stop's latency is measured in benchmarks/lab_scale.py
    assert night.interrupted and len(started) == WORKERS
    assert {o.status for o in night.devices.values()} == {NightOutcome.INTERRUPTED}
    never = [o for o in night.devices.values() if o.reason == "not started: the night was stopped first"]
    assert len(never) == n - WORKERS
    assert not any(lock_state(tmp_path / "locks", o.device).held for o in night.devices.values())
    # A queued device was never claimed: no claim file was ever made for it.
    assert not any((tmp_path / "locks").glob(f"{never[0].device}.*"))


def test_the_pool_size_is_validated_on_load(tmp_path):
    for bad, words in [(0, "must be positive"), (5000, "more than 1024"), ("many", "must be")]:
        try:
            _lab(tmp_path, 1, concurrency={"workers": bad})
        except PlanError as exc:
            assert "concurrency.workers" in str(exc) and words in str(exc), exc
        else:
            raise AssertionError(f"workers: {bad!r} was accepted")
