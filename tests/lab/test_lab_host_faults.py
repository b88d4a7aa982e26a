"""Faults on the host's side of a night (issue 21): an output folder that cannot be written,
a plan path that is a symlink loop and a damaged history are usage errors (exit 4) naming
the path, found before any device is claimed; a full disk at the reports leaves every final
file whole (the old one, or none) and ends with a clear error and exit 1, never a traceback
and 3; a history that breaks at the end still leaves night.json and the HTML from the
night's records."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from labkit import ShellJob, Switch, faulty_factory, write_inventory, write_plan

import harness.lab.cli as lab_cli
from harness.cli import main
from harness.lab import ExitCode, for_night, run_night
from harness.pairs import BackendPair
from harness.report import History, TestRecord, read_records

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _night(tmp_path: Path, out: Path, capsys, **plan) -> tuple[int, str]:
    """`harness lab run` in this process over one local device, the shell job standing in for
    llm_demo; returns the exit code and stderr."""
    inv = write_inventory(tmp_path, 1)
    plan_path = write_plan(tmp_path, **plan)
    code = main(["--file", str(inv), "lab", "run", "--plan", str(plan_path), "--out", str(out)])
    return code, capsys.readouterr().err


@pytest.fixture
def shell_job(monkeypatch):
    job = ShellJob()
    monkeypatch.setattr(lab_cli, "plan_job", job)
    return job


def _nothing_claimed(tmp_path: Path, job: ShellJob) -> None:
    assert not job.calls, job.calls
    assert not (tmp_path / "locks").exists()  # the claim folder is made by the first claim


def test_out_under_a_regular_file_is_a_usage_error_before_any_claim(tmp_path, capsys, shell_job):
    (tmp_path / "results").write_text("a file, not a folder\n")
    out = tmp_path / "results" / "night"
    code, err = _night(tmp_path, out, capsys)
    assert code == ExitCode.USAGE_ERROR, err
    assert f"{out}" in err and f"{tmp_path / 'results'} is a file" in err and "Traceback" not in err
    _nothing_claimed(tmp_path, shell_job)


def _run_in_mount_namespace(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`sh -c script args` as root of a new user + mount namespace (tmpfs mounts without
    touching the host); skips where the kernel does not allow it."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed: cannot mount a private tmpfs")
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here ({probe.stderr.strip()})")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)])}
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_out_on_a_read_only_disk_is_a_usage_error_before_any_claim(tmp_path):
    inv = write_inventory(tmp_path, 1)
    plan = write_plan(tmp_path)
    mnt = tmp_path / "ro"
    mnt.mkdir()
    run = _run_in_mount_namespace('mount -t tmpfs -o ro,size=64k tmpfs "$1" && shift && exec "$@"', str(mnt),
                                  sys.executable, "-m", "harness.cli", "--file", str(inv), "lab", "run",
                                  "--plan", str(plan), "--out", str(mnt / "night"))
    assert run.returncode == ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert f"{mnt / 'night'}" in run.stderr and "read-only" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "locks").exists()


def test_a_model_path_that_is_a_symlink_loop_names_the_key(tmp_path, capsys, shell_job):
    loop = tmp_path / "loop"
    os.symlink(tmp_path / "loop2", loop)
    os.symlink(loop, tmp_path / "loop2")
    code, err = _night(tmp_path, tmp_path / "out", capsys, models={"tiny": {"path": str(loop)}})
    assert code == ExitCode.USAGE_ERROR, err
    assert "key 'models.tiny.path'" in err and str(loop) in err and "Traceback" not in err
    _nothing_claimed(tmp_path, shell_job)


def _damaged_history(path: Path) -> None:
    with History(path) as h:
        for n in range(12):
            h.add_night(f"n{n}", [TestRecord(name=f"t{i}", suite="s", device="d", model="m", backend_pair=BackendPair.parse(f"qnn:p{i}"),
                                             decode_tps=10.0) for i in range(20)])
    with open(path, "r+b") as fh:  # a b-tree page overwritten: the header still says SQLite
        fh.seek(4096 * 3)
        fh.write(b"\xff" * 4096)


@pytest.mark.parametrize("damage", ["garbage", "page"])
def test_a_damaged_history_is_found_before_the_night(tmp_path, capsys, shell_job, damage):
    db = tmp_path / "history.sqlite"
    if damage == "garbage":
        db.write_bytes(b"this is not a database\n" * 200)
    else:
        _damaged_history(db)
    before = db.read_bytes()
    code, err = _night(tmp_path, tmp_path / "out", capsys, history={"db": str(db)})
    assert code == ExitCode.USAGE_ERROR, err
    assert "key 'history.db'" in err and str(db) in err and "mv " in err and "Traceback" not in err
    _nothing_claimed(tmp_path, shell_job)
    assert db.read_bytes() == before  # found, not "repaired"


def test_a_history_that_breaks_at_the_end_still_leaves_night_json_and_html(lab4, make_plan, monkeypatch):
    inv, root = lab4

    def broken(self, *a, **kw):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(History, "add_night", broken)
    night = run_night(make_plan(), inv, root / "out", ShellJob(), transport_factory=faulty_factory(Switch()),
                      say=lambda _m: None)
    assert night.counts.passed == 8
    assert any("history not updated" in p and "malformed" in p for p in night.report_problems), night.report_problems
    assert night.reports["html"].is_file() and night.reports["junit"].is_file()
    meta = json.loads((root / "out" / "night.json").read_text())
    assert meta["counts"]["passed"] == 8 and meta["report_problems"]
    assert "dev3" in night.reports["html"].read_text() and "Paris" in night.reports["html"].read_text()
    assert for_night(night) == ExitCode.TESTS_FAILED


def test_a_write_cut_by_a_full_disk_keeps_the_old_file_whole(tmp_path, monkeypatch):
    """Each report goes through write_atomic: a write that stops half way (ENOSPC) leaves the
    previous file at its path, no temp file, and one HostWriteError naming the path."""
    import harness.hostfiles as hostfiles
    from harness.errors import HostWriteError

    target = tmp_path / "junit.xml"
    hostfiles.write_atomic(target, "<old/>\n")
    real = hostfiles._write_all

    def half_then_full(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(hostfiles, "_write_all", half_then_full)
    with pytest.raises(HostWriteError, match=f"{target}.*no space left"):
        hostfiles.write_atomic(target, "<testsuites>" + "x" * 10000 + "</testsuites>\n")
    assert target.read_text() == "<old/>\n" and os.listdir(tmp_path) == ["junit.xml"]


def test_a_record_append_cut_by_a_full_disk_leaves_whole_lines(tmp_path, monkeypatch):
    import harness.hostfiles as hostfiles
    from harness.errors import HostWriteError
    from harness.report import RecordWriter

    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as w:
        w.write(TestRecord(name="a", suite="s", device="d"))
        real = hostfiles._write_all

        def half_then_full(fd: int, data: bytes) -> None:
            real(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(hostfiles, "_write_all", half_then_full)
        with pytest.raises(HostWriteError, match="records.jsonl"):
            w.write(TestRecord(name="b", suite="s", device="d", text="x" * 5000))
    assert [r.name for r in read_records(path)] == ["a"]


def test_a_full_disk_at_the_reports_keeps_the_last_reports_and_exits_1(tmp_path):
    """A real full disk: `harness lab run` twice into a 512 KiB tmpfs; the second night's
    last test fills it, so its reports cannot be written."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    run = _run_in_mount_namespace('mount -t tmpfs -o size=512k tmpfs "$1" && exec "$2" "$3" "$4" "$1"', str(mnt),
                                  sys.executable, str(HERE / "fulldisk_child.py"), str(tmp_path / "lab"))
    assert run.stdout.strip(), run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["first"] == ExitCode.OK, run.stderr
    assert seen["second"] == ExitCode.TESTS_FAILED, run.stderr
    assert "Traceback" not in run.stderr and "no space left" in run.stderr, run.stderr
    # The first night's reports are still there, whole; no temp file is left.
    assert seen["unchanged"] == {"junit.xml": True, "report.html": True, "junit/dev0.xml": True}, seen
    assert seen["temp_files"] == [], seen
    assert seen["night_json_whole"] and seen["records_whole"], seen


def test_a_full_disk_at_records_mid_night_ends_the_device_cleanly(tmp_path, capsys, shell_job, monkeypatch):
    """records.jsonl's disk fills after the first record (issue 36, fault 8): the device's night
    ends as a host fault naming the disk (exit 1), never an internal error or a quarantine, and
    no traceback from its thread."""
    import harness.report.records as records
    from harness.hostfiles import write_error

    real, calls = records.append_whole, []

    def full_after_one(fd: int, data: bytes, path: Path) -> None:
        calls.append(path)
        if path.name == "records.jsonl" and len(calls) > 1:
            raise write_error(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        real(fd, data, path)

    monkeypatch.setattr(records, "append_whole", full_after_one)
    out = tmp_path / "out"
    code, err = _night(tmp_path, out, capsys, repeats=3)
    captured = capsys.readouterr()
    assert code == ExitCode.TESTS_FAILED, err
    assert "Traceback" not in err + captured.err and "internal error" not in err, err
    assert "records.jsonl: no space left" in err and "dev0: results not kept" in err, err
    night = json.loads((out / "night.json").read_text())
    assert night["outcomes"]["dev0"]["status"] == "host-fault", night["outcomes"]


def test_a_full_disk_under_the_history_is_a_full_disk_never_damage(tmp_path):
    """A real full disk under the history database (issue 36, fault 11): at the night's start
    (no history yet) a usage error saying the disk is full, mid-night (SQLITE_FULL as the
    history is written) exit 1 saying so; never "damaged", never the advice to move it aside."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    run = _run_in_mount_namespace('mount -t tmpfs -o size=256k tmpfs "$1" && exec "$2" "$3" "$4" "$1"', str(mnt),
                                  sys.executable, str(HERE / "fullhistory_child.py"), str(tmp_path / "lab"))
    assert run.stdout.strip(), run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    _, first, second = run.stderr.split("=== night ")
    assert seen["first"] == ExitCode.USAGE_ERROR, first
    assert seen["second"] == ExitCode.TESTS_FAILED, second
    for said in (first, second):
        assert "disk is full" in said and "Traceback" not in said, said
        assert "damaged or" not in said and "not a usable" not in said and "mv " not in said, said
