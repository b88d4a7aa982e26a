"""One export, (build, target, format): served from the cache, or run in a temporary folder,
classified, validated as the harness validates any export, and sealed into the cache whole.

Nothing partial reaches a final path: the command writes into `tmp/<key>.<pid>.<rand>/out`, and
only a sealed entry is renamed to `entries/<key>` (cache.py). A stop (Ctrl-C, SIGTERM) ends the
command's process group (process.py) and removes the temporary folder."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.checks.localize import DEBUG_BUILD_FILES, DebugFiles
from harness.errors import HarnessError
from harness.evidence import CacheUse
from harness.lab.exports.building import Turn, building
from harness.lab.exports.cache import LOG_FILE, OUT_DIR, CacheEntry, ExportCache
from harness.lab.exports.classify import (
    ExportFailure,
    FailureVerdict,
    classify_failure,
    classify_not_started,
)
from harness.lab.exports.process import run_group
from harness.lab.exports.results import ExportResult
from harness.lab.exports.tools import HostTools
from harness.lab.plan import ExportJob
from harness.outcomes import Status

_LOG_READ = 8 << 20  # a long lowering's log: its head and tail are where QNN says why


def read_log(path: Path) -> str:
    """The log's text (head and tail of a very large one)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size <= 2 * _LOG_READ:
                return f.read().decode(errors="replace")
            head = f.read(_LOG_READ)
            f.seek(size - _LOG_READ)
            return (head + b"\n[... middle of the log left out ...]\n" + f.read()).decode(errors="replace")
    except OSError:
        return ""


def read_tail(path: Path, size: int = 8000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def validate_debug_build(out: Path, job: ExportJob) -> FailureVerdict | None:
    """A debug build is the files the localize check reads (docs/localize.md#files), all of them."""
    missing = DebugFiles(out).missing_build()
    if not missing:
        return None
    args = " ".join(job.build.debug_args)
    return FailureVerdict(ExportFailure.INVALID.value,
                          f"its debug build ({args}) wrote no {', '.join(missing)} to {{out}}; the exporter's "
                          f"{job.build.label}.debug_args must make it write {', '.join(DEBUG_BUILD_FILES)} "
                          "(docs/localize.md#files)")


def validate_reference(out: Path) -> FailureVerdict | None:
    """A float reference is the reference/ the float-reference check reads, readable whole."""
    from harness.checks import read_float_reference

    try:
        found = read_float_reference(out)
    except HarnessError as exc:
        return FailureVerdict(ExportFailure.INVALID.value, f"its float reference is unreadable: {exc}")
    if found is None:
        return FailureVerdict(ExportFailure.INVALID.value, "the float reference builder wrote no reference/reference.json "
                              "to {out}")
    return None


def validate_export(out: Path, job: ExportJob) -> FailureVerdict | None:
    """The folder the command wrote, checked as `harness push` checks an export: a known layout,
    nothing empty, and compiled for this job's target when the export says what it was built for.
    A debug build is checked for the debug program's files instead."""
    from harness.provision import load_export

    if not out.is_dir() or not any(out.iterdir()):
        return FailureVerdict(ExportFailure.NO_OUTPUT.value, f"exited 0 but wrote nothing to {{out}} ({out.name}/); "
                              "the command must write its export into the folder {out} names")
    if job.debug:
        return validate_debug_build(out, job)
    if job.reference:
        return validate_reference(out)
    try:
        artifact = load_export(out)
    except HarnessError as exc:
        # The build's folder is gone once this verdict is read: name it as the command did, {out}.
        said = str(exc).replace(str(out.resolve()), "{out}").replace(str(out), "{out}")
        return FailureVerdict(ExportFailure.INVALID.value, f"its output is not an export the harness can run: {said}")
    t = artifact.target
    if t is not None and ((t.soc_id is not None and t.soc_id != job.target.soc_id)
                          or (t.htp_arch is not None and t.htp_arch != job.target.dsp_arch)):
        return FailureVerdict(ExportFailure.INVALID.value,
                              f"built for soc_id {t.soc_id} / {t.htp_arch} ({t.source}), not for {job.target.soc} "
                              f"(soc_id {job.target.soc_id}, {job.target.dsp_arch}); check the command's placeholders")
    return None


@dataclass
class Builder:
    cache: ExportCache
    tools: HostTools
    stop: threading.Event
    base_env: Mapping[str, str]
    logs_dir: Path  # the night's copy of every export's log: <out>/exports/logs/<model>/<id>.log
    rebuild: bool = False

    def result_of(self, job: ExportJob, key: str, entry: CacheEntry, cache: CacheUse, started: float,
                  argv: list[str], note: str = "") -> ExportResult:
        failure = None if entry.passed else FailureVerdict.from_json(entry.data["failure"])
        result = ExportResult(job, Status.PASSED if entry.passed else Status.FAILED, key=key, cache=cache,
                              folder=entry.out if entry.passed else None, failure=failure,
                              build_s=entry.data.get("build_s"), argv=argv, note=note)
        return self._finish(result, entry.log, started)

    def _finish(self, result: ExportResult, log: Path, started: float) -> ExportResult:
        """The night's copy of the log, its tail for the record, the time this night spent."""
        kept = self.logs_dir / result.job.build.model / f"{result.job.id}.log"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, kept)
        result.log = kept
        result.log_tail = read_tail(kept)
        result.duration_s = time.monotonic() - started
        return result

    def run(self, job: ExportJob, key: str) -> ExportResult:
        started = time.monotonic()
        argv_shown = job.argv(Path("{out}"))
        if self.stop.is_set():  # queued behind others when the stop came: never started
            return ExportResult(job, Status.ERROR, key=key, argv=argv_shown, note="not started: the night was stopped")
        note = ""
        if not self.rebuild:
            entry, note = self.cache.lookup(key)
            if entry is not None:
                return self.result_of(job, key, entry, CacheUse.HIT, started, argv_shown)
        with building(self.cache.root / "building", key, self.stop) as turn:
            if turn is Turn.STOPPED:
                return ExportResult(job, Status.ERROR, key=key, argv=argv_shown,
                                    note="not started: the night was stopped while another run built it")
            if turn is Turn.WAITED:  # another run built this key meanwhile: its entry is this one's
                entry, _ = self.cache.lookup(key)
                if entry is not None:
                    return self.result_of(job, key, entry, CacheUse.HIT, started, argv_shown,
                                          note="built meanwhile by another run")
            cached_before = (self.cache.entries / key).exists()
            use = CacheUse.REPAIRED if note else CacheUse.REBUILT if cached_before else CacheUse.MISS
            return self._build(job, key, use, started, note)

    def _env(self, job: ExportJob) -> tuple[dict[str, str] | None, FailureVerdict | None]:
        env = {**self.base_env, **job.build.env}
        if not job.build.qnn_host:
            return env, None
        if self.tools.qnn is None:
            return None, FailureVerdict(ExportFailure.MISSING_TOOL.value,
                                        f"the host QNN is needed (qnn_host: true) but: {self.tools.qnn_problem}",
                                        cacheable=False)
        return self.tools.qnn.child_env(env), None

    def _build(self, job: ExportJob, key: str, use: CacheUse, started: float, note: str) -> ExportResult:
        folder = self.cache.new_build_dir(key)
        out, log = folder / OUT_DIR, folder / LOG_FILE
        out.mkdir()
        argv = job.argv(out)
        shown = job.argv(Path("{out}"))
        env, failure = self._env(job)
        header = f"$ {' '.join(shown)}\n# target {job.target.soc} (soc_id {job.target.soc_id}, {job.target.dsp_arch})\n"
        log.write_text(header, encoding="utf-8")
        end = None
        if env is not None:
            end = run_group(argv, cwd=job.build.cwd, env=env, log_path=log, timeout_s=job.build.timeout_s,
                            stop=self.stop)
        if end is not None and end.stopped:
            result = self._finish(ExportResult(job, Status.ERROR, key=key, cache=use, argv=shown, note=note),
                                  log, started)
            shutil.rmtree(folder, ignore_errors=True)  # nothing partial kept anywhere
            return result
        text = read_log(log)
        if failure is None and end is not None:
            if end.start_error is not None:
                failure = classify_not_started(end.start_error, argv[0])
            elif end.timed_out or end.returncode != 0:
                failure = classify_failure(text, end.returncode, shell=job.build.shell,
                                           timed_out=job.build.timeout_s if end.timed_out else None)
            else:
                failure = validate_export(out, job)
        build_s = round(time.monotonic() - started, 2)
        if failure is not None and not failure.cacheable:
            result = self._finish(ExportResult(job, Status.FAILED, key=key, cache=CacheUse.NOT_KEPT, failure=failure,
                                               build_s=build_s, argv=shown, note=note), log, started)
            shutil.rmtree(folder, ignore_errors=True)
            return result
        if failure is not None:
            shutil.rmtree(out, ignore_errors=True)  # a failed build keeps its log, not its half-made files
            out.mkdir()
        entry = self.cache.commit(key, folder, {
            "status": "passed" if failure is None else "failed", "failure": failure.to_json() if failure else None,
            "build_s": build_s, "argv": shown, "job": job.id, "model": job.build.model})
        return self.result_of(job, key, entry, use, started, shown, note)
