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
