"""The one small interface every device link implements (adb, ssh, local).

Concrete transports implement a handful of primitives (`_exec`, file copy, stat); the
behaviour built on top of them (kill-on-timeout by pid, trees, health) lives here once.
"""

from __future__ import annotations

import os
import posixpath
import stat as stat_mod
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from harness.errors import CommandFailed, CommandTimeout, HarnessError, TransportError
from harness.inventory import DeviceSpec, TransportKind
from harness.transport.command import build_shell_command, quote_argv
from harness.transport.facts import PROBE_SCRIPT, DeviceFacts, ProbeUnreadable, parse_df_free, parse_probe
from harness.transport.pidfiles import PID_PREFIX, PROVEN_KILL_SCRIPT, DeviceProcess, parse_killed, parse_stat_line
from harness.transport.retry import RetryPolicy
from harness.transport.stop import CommandWatch, check_stop, stoppable
from harness.transport.types import CommandResult, HealthReport, LinkState, RawExec, RemoteStat, link_state_of

ProgressFn = Callable[[int], None]  # called with the bytes just moved
# A timed shell() records who its program is in <device_tmp_dir>/pid-<random> (the device shell
# removes it when the program ends); this class alone reads those files (kill on timeout,
# kill_stray_processes), and kills only a process they prove ours (harness/transport/pidfiles.py).


class Transport(ABC):
    """A link to one device. Methods raise TransportError subclasses for link faults."""

    kind: ClassVar[TransportKind | None] = None  # each driver's kind (inventory's `transport:`)
    # True while free_bytes() answers exactly what POSIX `df -k` on the device prints, so a
    # caller that already ran df in a script of its own may use that number instead.
    free_bytes_is_df: ClassVar[bool] = True

    def __init__(self, device: DeviceSpec, retry: RetryPolicy | None = None):
        self.device = device
        self.retry = retry or RetryPolicy()
        self.stop_event: threading.Event | None = None  # stop.py: set by stop_on()

    def stop_on(self, event: threading.Event | None) -> None:
        """Once `event` is set, timed commands are not started and running ones are killed on
        the device, pushes stop between chunks: StopRequested (harness/transport/stop.py)."""
        self.stop_event = event

    def _stop_set(self) -> bool:
        return self.stop_event is not None and self.stop_event.is_set()

    # ---- primitives each transport implements -------------------------------------------
    @abstractmethod
    def _exec(self, command: str, timeout: float | None) -> RawExec:
        """Run one shell string on the device. On timeout return RawExec(timed_out=True)
        after abandoning the local side; the caller kills the device process."""

    @abstractmethod
    def _push_file(self, local: Path, remote: str, mode: int, progress: ProgressFn | None) -> int: ...

    @abstractmethod
    def _pull_file(self, remote: str, local: Path, progress: ProgressFn | None) -> int: ...

    @abstractmethod
    def stat(self, remote: str) -> RemoteStat | None: ...

    def close(self) -> None:  # noqa: B027 (optional hook: a transport without connections has nothing to do)
        """Release connections; the transport may be reopened by the next call."""

    # ---- commands -----------------------------------------------------------------------
    def shell(
        self,
        args: Sequence[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
    ) -> CommandResult:
        """Run argv on the device. With a timeout the program's device pid and start time are
        recorded so a run that overstays is killed on the device (and verified gone), not only
        abandoned; the record goes when the program ends."""
        pid_file = self._pid_file() if timeout is not None else None
        if pid_file:
            check_stop(self, f"starting `{args[0]}`")
        command = build_shell_command(args, cwd=cwd, env=env, pid_file=pid_file)
        if pid_file and not getattr(self, "_tmp_ready", False):
            # So does making the scratch folder the first pid file goes to (a lab night opens
            # every device at once; each round trip is a process spawn on the device).
            command = f"{quote_argv(['mkdir', '-p', posixpath.dirname(pid_file)])}; {command}"
        started = time.monotonic()
        # A program the stop kills ends with 128+9 like any killed one: the caller's record of the
        # test in flight then says what happened (the lab marks it interrupted); the next one is refused.
        with CommandWatch(self, pid_file):
            raw = self._run_exec(args, command, timeout)
        duration = time.monotonic() - started
        if pid_file:
            self._tmp_ready = True
            if raw.timed_out:
                self._kill_from_pid_file(pid_file)
                self._exec(quote_argv(["rm", "-f", pid_file]), 30)
        return self._result(args, raw, duration, check)

    def _result(self, args: Sequence[str], raw: RawExec, duration: float, check: bool) -> CommandResult:
        result = CommandResult(
            args=tuple(str(a) for a in args),
            stdout=raw.stdout.decode("utf-8", "replace"),
            stderr=raw.stderr.decode("utf-8", "replace"),
            exit_code=raw.exit_code,
            duration_s=duration,
            timed_out=raw.timed_out,
        )
        if check:
            result.check(self.device.name)
        return result

    def quick(self, args: Sequence[str], *, timeout: float = 60, check: bool = True) -> CommandResult:
        """A short file-system command (mkdir, mv, rm, df): no pid file, one round trip. A
        timeout abandons it instead of killing it on the device: use shell() for programs."""
        command = build_shell_command(args)
        started = time.monotonic()
        raw = self._run_exec(args, command, timeout)
        return self._result(args, raw, time.monotonic() - started, check)

    def _run_exec(self, args: Sequence[str], command: str, timeout: float | None) -> RawExec:
        """`_exec` under the retry policy; a link fault gets the device and argv the driver
        had only as a shell string."""
        try:
            return self.retry.run(f"{self.device.name}: {args[0]}", lambda: self._exec(command, timeout),
                                  stopped=self._stop_set)
        except TransportError as exc:
            exc.fill(device=self.device.name, argv=args)
            raise

    def _pid_file(self) -> str:
        # In device_tmp_dir(), which shell() makes on the way if it is not there yet.
        return posixpath.join(self._tmp_path(), f"{PID_PREFIX}{os.urandom(16).hex()}")

    def _tmp_path(self) -> str:
        return posixpath.join(self.device.work_dir, ".harness")

    def device_tmp_dir(self) -> str:
        """A writable scratch folder on the device (created on first use)."""
        path = self._tmp_path()
        if not getattr(self, "_tmp_ready", False):
            self._exec(quote_argv(["mkdir", "-p", path]), 30)
            self._tmp_ready = True
        return path

    def _kill_from_pid_file(self, pid_file: str) -> None:
        raw = self._exec(quote_argv(["cat", pid_file]), 30)
        proc = parse_stat_line(raw.stdout.decode(errors="replace"))
        if proc is not None and not self.kill_proven([proc]) and self._is_process(proc):
            raise CommandTimeout(f"{self.device.name}: timed-out process {proc.pid} could not be killed",
                                 device=self.device.name)

    def kill_proven(self, procs: Iterable[DeviceProcess], wait_s: float = 5.0) -> list[int]:
        """SIGKILL each process that is still the one recorded (same pid AND start time, checked
        on the device just before the signal) and wait until it is gone. Returns the pids it
        killed; a pid now naming another process is left alone."""
        procs = sorted(set(procs))
        if not procs:
            return []
        res = self.quick(["sh", "-c", PROVEN_KILL_SCRIPT, "proven-kill", *(p.arg for p in procs)], check=False)
        gone = []
        deadline = time.monotonic() + wait_s
        for pid in parse_killed(res.stdout):  # SIGKILLed: gone once reaped (no new pid meanwhile)
            while self.is_running(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not self.is_running(pid):
                gone.append(pid)
        return gone

    def _is_process(self, proc: DeviceProcess) -> bool:
        """Whether `proc` (that pid with that start time) still runs."""
        raw = self._exec(f"cat /proc/{int(proc.pid)}/stat 2>/dev/null", 30)
        live = parse_stat_line(raw.stdout.decode(errors="replace"))
        state = raw.stdout.decode(errors="replace").rsplit(")", 1)[-1].split()[:1]
        return live == proc and state != ["Z"]

    def is_running(self, pid: int) -> bool:
        # kill -0 succeeds while the process exists; a zombie still counts until reaped,
        # so also look at its state in /proc.
        raw = self._exec(f"kill -0 {int(pid)} 2>/dev/null && cat /proc/{int(pid)}/stat 2>/dev/null", 30)
        if raw.exit_code != 0:
            return False
        fields = raw.stdout.decode(errors="replace").rsplit(")", 1)
        return not (len(fields) == 2 and fields[1].split()[:1] == ["Z"])

    def kill(self, pid: int, sig: int = 9, wait_s: float = 5.0) -> bool:
        """Signal a device process and confirm it is gone. True when it no longer runs."""
        self._exec(f"kill -{int(sig)} {int(pid)} 2>/dev/null", 30)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not self.is_running(pid):
                return True
            time.sleep(0.05)
        return not self.is_running(pid)

    def kill_stray_processes(self, pids: Iterable[int] = ()) -> list[int]:
        """Kill `pids` (the caller's own) and every program a timed shell()
        left running (the pid files in the scratch folder, from any transport object on this
        device), but only a process its file proves to be that program (pid and start time,
        pidfiles.py): a stale file naming a pid the kernel has since given to another process
        kills nothing. For a caller that holds the device's claim. The files read are removed.
        Returns the pids killed, and `pids`."""
        # Not device_tmp_dir(): making a missing folder to find nothing in it was one shell
        # command of four in a stop's sweep (find on a missing folder prints nothing).
        scratch = self._tmp_path()
        # quick(), not list_files(): a timed find would leave a pid file of its own to sweep.
        res = self.quick(["find", scratch, "-type", "f", "-name", f"{PID_PREFIX}*"], check=False)
        files = [ln for ln in res.stdout.splitlines() if posixpath.basename(ln).startswith(PID_PREFIX)]
        recorded = {f: parse_stat_line((data or b"").decode(errors="replace"))
                    for f, data in self.read_small_files(files).items()}
        handled = set(self.kill_proven([p for p in recorded.values() if p is not None]))
        for pid in sorted(set(pids)):
            if self.is_running(pid):
                self.kill(pid)
            handled.add(pid)
        done = [f for f, p in recorded.items() if p is not None]
        unparsed = {f for f, p in recorded.items() if p is None}
        if unparsed:  # a command starting writes its file in microseconds: one still unreadable after
            # a minute never will be (a cut write, a full disk), and would stay forever
            old = self.quick(["find", scratch, "-type", "f", "-name", f"{PID_PREFIX}*", "-mmin", "+1"], check=False)
            done += sorted(unparsed & set(old.stdout.splitlines()))
        if done:
            self.remove(*done)
        return sorted(handled)

    # ---- files --------------------------------------------------------------------------
    def push(self, local: Path, remote: str, *, mode: int | None = None, progress: ProgressFn | None = None) -> int:
        local = Path(local)
        if not local.is_file():
            raise TransportError(f"{self.device.name}: cannot push {local}: not a file", device=self.device.name)
        file_mode = mode if mode is not None else stat_mod.S_IMODE(local.stat().st_mode)
        check_stop(self, f"pushing {local.name}")
        progress = stoppable(self, progress, f"push of {local.name}")
        return self.retry.run(f"push {local.name}", lambda: self._push_file(local, remote, file_mode, progress),
                              stopped=self._stop_set)

    def push_many(self, jobs: Sequence[tuple[Path, str, int]], *, progress: ProgressFn | None = None,
                  on_done: Callable[[str], None] | None = None,
                  on_digest: Callable[[str, str], None] | None = None) -> int:
        """Push (local, remote, mode) jobs; `on_done(remote)` as the device confirms each,
        `on_digest(remote, sha256)` where the driver hashes what it sends (hashes_while_pushing).
        Drivers with a pipelined file protocol send them back to back (adb, `_push_many`).
        Once the stop is set it ends between chunks (StopRequested, stop.py)."""
        jobs = list(jobs)
        if jobs:
            check_stop(self, f"pushing {len(jobs)} files")
        progress = stoppable(self, progress, f"push of {len(jobs)} files")
        return self._push_many(jobs, progress=progress, on_done=on_done, on_digest=on_digest)

    def _push_many(self, jobs: Sequence[tuple[Path, str, int]], *, progress: ProgressFn | None = None,
                   on_done: Callable[[str], None] | None = None,
                   on_digest: Callable[[str, str], None] | None = None) -> int:
        total = 0
        for local, remote, mode in jobs:
            total += self.push(local, remote, mode=mode, progress=progress)
            if on_done is not None:
                on_done(remote)
        return total

    def pull(self, remote: str, local: Path, *, progress: ProgressFn | None = None) -> int:
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        return self.retry.run(f"pull {remote}", lambda: self._pull_file(remote, local, progress),
                              stopped=self._stop_set)

    def push_tree(self, local_dir: Path, remote_dir: str, progress: ProgressFn | None = None) -> int:
        local_dir = Path(local_dir)
        total = 0
        dirs = {remote_dir}
        files = sorted(p for p in local_dir.rglob("*") if p.is_file())
        for p in files:
            dirs.add(posixpath.join(remote_dir, *p.parent.relative_to(local_dir).parts))
        self.makedirs(*sorted(dirs))
        for p in files:
            rel = p.relative_to(local_dir).as_posix()
            total += self.push(p, posixpath.join(remote_dir, rel), progress=progress)
        return total

    def list_files(self, remote_dir: str) -> list[str]:
        """Relative paths of regular files under remote_dir (empty when it does not exist)."""
        res = self.shell(["find", remote_dir, "-type", "f"], timeout=120)
        if res.exit_code != 0:
            return []
        prefix = remote_dir.rstrip("/") + "/"
        return sorted(line[len(prefix):] for line in res.stdout.splitlines() if line.startswith(prefix))

    def stat_many(self, remotes: Sequence[str]) -> dict[str, RemoteStat | None]:
        """Stat several paths; drivers with a file protocol answer in one session."""
        return {r: self.stat(r) for r in remotes}

    def read_small_files(self, remotes: Sequence[str], max_bytes: int = 4 << 20) -> dict[str, bytes | None]:
        """Contents of small device files (manifests, journals); None where a file is absent."""
        import tempfile  # rarely needed: shutil/lzma/random are ~10 ms of start-up

        out: dict[str, bytes | None] = {}
        with tempfile.TemporaryDirectory(prefix="harness-read-") as tmp:
            for i, remote in enumerate(remotes):
                st = self.stat(remote)
                if st is None or not st.is_file:
                    out[remote] = None
                    continue
                if st.size > max_bytes:
                    raise TransportError(f"{self.device.name}: {remote} is {st.size} bytes, more than the "
                                         f"{max_bytes} a small read allows", device=self.device.name)
                local = Path(tmp) / str(i)
                self.pull(remote, local)
                out[remote] = local.read_bytes()
        return out

    def read_and_stat(self, reads: Sequence[str], stats: Sequence[str], max_bytes: int = 4 << 20
                      ) -> tuple[dict[str, bytes | None], dict[str, RemoteStat | None]]:
        """read_small_files(reads) and stat_many(stats) at once; drivers with a file protocol
        pipeline both in one session (a provisioning check that nothing changed)."""
        return self.read_small_files(reads, max_bytes), self.stat_many(stats)

    def exists(self, remote: str) -> bool:
        return self.stat(remote) is not None

    def makedirs(self, *remote_dirs: str) -> None:
        if remote_dirs:
            self.quick(["mkdir", "-p", *remote_dirs])

    def rename(self, src: str, dst: str) -> None:
        self.quick(["mv", "-f", src, dst])

    def remove(self, *remote: str, recursive: bool = False) -> None:
        if remote:
            self.quick(["rm", "-rf" if recursive else "-f", *remote], timeout=120)

    def free_bytes(self, remote: str) -> int:
        """Free bytes on the filesystem holding `remote` (POSIX `df -k`, as toybox prints it)."""
        res = self.quick(["df", "-k", remote])
        free = parse_df_free(res.stdout)
        if free is None:
            raise TransportError(f"{self.device.name}: cannot read free space from `df -k {remote}`: {res.stdout!r}",
                                 device=self.device.name, argv=res.args, exit_code=res.exit_code,
                                 stdout=res.stdout, stderr=res.stderr)
        return free

    def sha256(self, remote: str) -> str | None:
        res = self.shell(["sha256sum", remote], timeout=600)
        if res.exit_code != 0:
            return None
        return res.stdout.split()[0] if res.stdout.split() else None

    # ---- facts and health ---------------------------------------------------------------
    def facts(self) -> dict[str, str]:
        """`getprop`-like facts about who the device is: at least `soc_model` and `model`."""
        return {}

    def device_facts(self) -> DeviceFacts:
        """The device's condition (free space for the work folder, battery, boot), None where
        it cannot tell, in one round trip. TransportError for link faults; CommandFailed when
        the shell or its df answers something unreadable."""
        res = self.quick(["sh", "-c", PROBE_SCRIPT, "device-facts", self.device.work_dir], timeout=30, check=False)
        try:
            return parse_probe(res.stdout)
        except ProbeUnreadable as exc:
            raise CommandFailed(f"{self.device.name}: device facts: {exc} (exit {res.exit_code})",
                                device=self.device.name, argv=res.args, exit_code=res.exit_code,
                                stdout=res.stdout, stderr=res.stderr) from None

    def _link_health(self) -> HealthReport:
        """Reachability only: does a shell answer?"""
        report = HealthReport(device=self.device.name, reachable=False)
        try:
            res = self.shell(["echo", "ok"], timeout=20)
        except TransportError as exc:
            report.state = link_state_of(exc)
            report.problems.append(str(exc))
            return report
        report.reachable = res.stdout.strip() == "ok"
        report.state = LinkState.OK if report.reachable else LinkState.BROKEN
        if not report.reachable:
            report.problems.append(f"`echo ok` printed {res.stdout!r} (exit {res.exit_code})")
        return report

    def health(self) -> HealthReport:
        """Reachability, who the device is and its condition. Link faults become problems;
        judging the condition against thresholds is the caller's (harness/lab/health.py)."""
        report = self._link_health()
        if not report.reachable or report.problems:
            return report
        try:
            report.facts = self.facts()
            report.device_facts = self.device_facts()
        except TransportError as exc:
            report.state = link_state_of(exc)
            report.problems.append(str(exc))
        except HarnessError as exc:  # a reply we could not read (e.g. odd `df`)
            report.state = LinkState.BROKEN
            report.problems.append(f"{self.device.name}: health check failed: {exc}")
        return report

    def tidy(self) -> None:  # noqa: B027 (optional hook)
        """Remove this transport's leftover scratch files on the device (best effort). A timed
        command's pid file is removed by the device shell when the command ends."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.tidy()
        self.close()


def remote_join(*parts: str) -> str:
    return posixpath.join(*parts)


__all__ = ["ProgressFn", "Transport", "remote_join"]
