"""The night's reports (harness/lab/night_reports.py): JUnit is written on a thread of its own
while the history and the HTML page are; a failure of either side is still named, first
JUnit's, and the other side still written."""

from __future__ import annotations

import errno

import pytest

import harness.report
from harness.lab import write_night_reports
from harness.report import TestRecord


def _records() -> list[TestRecord]:
    return [TestRecord(name=f"t{i}", suite="s", device=f"dev{i % 3}", duration_s=0.1) for i in range(6)]


def _write(tmp_path):
    return write_night_reports(_records(), tmp_path / "out", run_id="r1", plan_name="p", started_at=0.0,
                               history_db=tmp_path / "history.sqlite")


@pytest.fixture
def out(tmp_path):
    (tmp_path / "out").mkdir()
    return tmp_path


def test_a_junit_failure_on_its_thread_is_named_first_and_the_rest_is_written(out, monkeypatch):
    def full(records, out_dir):
        raise OSError(errno.ENOSPC, "No space left on device", str(out_dir / "junit.xml"))

    def html_fails(*args, **kwargs):
        raise OSError(errno.EACCES, "Permission denied", str(out / "out" / "report.html"))

    paths, _, problems = _write(out)
    assert problems == [] and list(paths)[:4] == ["junit", "junit:dev0", "junit:dev1", "junit:dev2"]
    assert list(paths)[4:] == ["history", "html"] and all(p.is_file() for p in paths.values())
    monkeypatch.setattr(harness.report, "write_junit", full)
    paths, _, problems = _write(out)
    assert problems[0].startswith("JUnit not written:") and "junit.xml" in problems[0]
    assert paths["html"].is_file() and paths["history"].is_file() and "junit" not in paths
    monkeypatch.setattr(harness.report, "write_html", html_fails)
    paths, _, problems = _write(out)
    assert [p.split(":")[0] for p in problems] == ["JUnit not written", "HTML report not written"]


def test_a_night_without_speed_history_writes_its_reports_without_importing_matplotlib(tmp_path):
    """Issue 44: matplotlib's import (1.5-3 s under load) was the largest part of a stopped
    night's reports though nothing was plotted; in a child, where nothing imported it before."""
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from harness.lab import write_night_reports; "
            "from harness.report import TestRecord; "
            "recs = [TestRecord(name='t', suite='s', device='dev0', duration_s=0.1)]; "
            f"p, _, problems = write_night_reports(recs, Path({str(tmp_path)!r}), run_id='r1', plan_name='p', "
            f"started_at=0.0, history_db=Path({str(tmp_path / 'h.sqlite')!r})); "
            "assert problems == [] and 'html' in p, problems; "
            "print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_stopped_nights_records_are_read_once(tmp_path, monkeypatch):
    """Issue 44: records.jsonl was read for the reports and again for the counts (0.35 s a
    read at a 1 000-device stop)."""
    import yaml

    from harness.inventory import load_inventory
    from harness.lab import NightResult, run_night
    from harness.lab.plan import load_plan

    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "d0", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w0")}]}))
    (tmp_path / "export").mkdir()
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "p", "models": {"m": {"path": "export"}},
                                    "suites": [{"name": "bench", "models": ["m"], "backends": ["cpu"]}],
                                    "options": {"runtime_dir": "export"}, "locks": {"dir": "locks"}}))
    reads: list[int] = []
    real = NightResult.records

    def counted(self):
        reads.append(1)
        return real(self)

    monkeypatch.setattr(NightResult, "records", counted)

    def job(ctx):
        yield TestRecord(name="t", suite=ctx.entry.suite.name, device=ctx.device.name, duration_s=0.0)

    night = run_night(load_plan(plan), load_inventory(inv), tmp_path / "out", job, history_db=tmp_path / "h.sqlite")
    assert night.counts.passed == 1 and "html" in night.reports
    assert len(reads) == 1
