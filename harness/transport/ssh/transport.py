"""ssh driver (paramiko) for Linux boards such as the SA8295 cockpit.

Commands run over exec channels (exit status, stdout and stderr apart); files go over
SFTP with pipelined writes. The link is opened by connect.py (host keys as OpenSSH checks
them, the login, paramiko's log kept off the terminal). The connection is opened
lazily and reopened by the next call after a link fault; a link that dies during login is a
dropped connection (retried), only the server's refusal is "unauthorized". A link lost after
a command was sent is CommandOutcomeUnknown: the command is never sent again.
"""

from __future__ import annotations

import errno
import logging
import posixpath
import select
import threading
import time
from pathlib import Path

import paramiko

from harness.errors import (
    CommandOutcomeUnknown,
    ConnectionDropped,
    RemoteNoSpaceError,
    RemotePathError,
    TransportError,
)
from harness.inventory import SSH, DeviceSpec
from harness.transport.base import ProgressFn, Transport
from harness.transport.command import quote_argv
from harness.transport.retry import RetryPolicy
from harness.transport.ssh.connect import (
    CONNECT_TIMEOUT,
    connect_client,
    is_link_fault,
)
from harness.transport.types import RawExec, RemoteStat

log = logging.getLogger("harness.transport")
_CHUNK = 1 << 20  # local read size; paramiko splits SFTP writes into 32 KiB requests
_WINDOW = 16 << 20  # a large channel window keeps pipelined SFTP writes flowing

# Why a fixed script: one round trip for all facts; it interpolates nothing.
_FACTS_SCRIPT = (
    "uname -m; uname -r; uname -n; "
    "if [ -r /proc/device-tree/model ]; then tr -d '\\000' < /proc/device-tree/model; fi; echo; "
    "if command -v getprop >/dev/null 2>&1; then getprop ro.product.model; getprop ro.soc.model; "
    "else echo; echo; fi"
)


class SshTransport(Transport):
    kind = SSH

    def __init__(self, device: DeviceSpec, retry: RetryPolicy | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT):
        super().__init__(device, retry)
        if device.ssh is None:
            raise TransportError(f"{device.name}: no `ssh:` settings in {device.source or 'devices.yaml'}; "
                                 "add host, user and key for this device", device=device.name)
        self.spec = device.ssh
        self.connect_timeout = connect_timeout
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()  # guards connecting/dropping
        self._sftp_lock = threading.RLock()  # one SFTP request stream at a time

    # ---- connection ---------------------------------------------------------------------
    @property
    def _where(self) -> str:
        return f"{self.spec.host}:{self.spec.port}"

    @property
    def _inventory(self) -> str:
        return str(self.device.source or "devices.yaml")

    def _connected(self) -> paramiko.SSHClient:
        with self._lock:
            if self._client is not None:
                transport = self._client.get_transport()
                if transport is not None and transport.is_active():
                    return self._client
                self._drop()
            self._client = self._connect()
            return self._client

    def _connect(self) -> paramiko.SSHClient:
        return connect_client(self.spec, name=self.device.name, inventory=self._inventory,
                              timeout=self.connect_timeout)

    def _link_alive(self) -> bool:
        client = self._client
        transport = client.get_transport() if client is not None else None
        return transport is not None and transport.is_active()

    def _drop(self) -> None:
        """Forget a broken connection; the next call reconnects."""
        with self._lock:
            sftp, client = self._sftp, self._client
            self._sftp, self._client = None, None
        for thing in (sftp, client):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # closing a dead link may fail in any way; it is gone either way
                    pass

    def _dropped(self, what: str, exc: BaseException) -> ConnectionDropped:
        self._drop()
        return ConnectionDropped(f"{self.device.name}: ssh link to {self._where} dropped during {what} "
                                 f"({type(exc).__name__}: {exc})", device=self.device.name)

    def close(self) -> None:
        self._drop()

    # ---- commands -----------------------------------------------------------------------
    def _exec(self, command: str, timeout: float | None) -> RawExec:
        client = self._connected()
        # Run in a child `sh` and exit with its status: a program killed by a signal then
        # reports 128+N like on adb, where sshd would send an exit-signal paramiko drops.
        wrapped = f"sh -c {quote_argv([command])}; exit $?"
        try:
            transport = client.get_transport()
            if transport is None:
                raise EOFError("no transport")
            chan = transport.open_session(timeout=self.connect_timeout)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise self._dropped("opening a command channel", exc) from None  # nothing was sent yet
        try:
            chan.exec_command(wrapped)
            chan.shutdown_write()
            return self._collect(chan, timeout)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self._drop()
            raise CommandOutcomeUnknown(
                f"{self.device.name}: ssh link to {self._where} lost while a command was running "
                f"({type(exc).__name__}: {exc}); it may have run (wholly or in part), so it is not sent again. "
                "Check the board's state and run it again only if that is safe", device=self.device.name) from None
        finally:
            chan.close()

    def _collect(self, chan: paramiko.Channel, timeout: float | None) -> RawExec:
        out, err = bytearray(), bytearray()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while chan.recv_ready():
                out += chan.recv(1 << 16)
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(1 << 16)
            if chan.exit_status_ready() and (chan.eof_received or chan.closed) \
                    and not chan.recv_ready() and not chan.recv_stderr_ready():
                # paramiko calls a closed channel's status "ready" whether or not the board sent one:
                # -1 (its initial value) means none came (link died, shell killed): it may have run.
                if chan.exit_status == -1:
                    transport = chan.get_transport()
                    link = "the link is down" if transport is None or not transport.is_active() else \
                        "the board's shell ended without one"
                    raise EOFError(f"the command's channel closed without an exit status ({link})")
                return RawExec(bytes(out), bytes(err), chan.exit_status)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                # Abandon our side; the base class kills the device process by pid.
                return RawExec(bytes(out), bytes(err), -1, timed_out=True)
            wait = 1.0 if deadline is None else min(1.0, deadline - now)
            select.select([chan], [], [], wait)
            transport = chan.get_transport()
            if not transport.is_active():
                raise EOFError("ssh transport closed")

    # ---- files --------------------------------------------------------------------------
    def _sftp_client(self) -> paramiko.SFTPClient:
        client = self._connected()
        with self._lock:
            if self._sftp is None:
                transport = client.get_transport()
                if transport is None:   # the connection closed under us
                    raise ConnectionDropped(f"{self.device.name}: ssh connection to {self._where} closed before "
                                            "SFTP could open; run again", device=self.device.name)
                try:
                    self._sftp = paramiko.SFTPClient.from_transport(transport, window_size=_WINDOW)
                except (OSError, EOFError, paramiko.SSHException) as exc:
                    raise self._dropped("opening SFTP (is `Subsystem sftp` enabled in sshd_config?)", exc) from None
                if self._sftp is None:
                    raise ConnectionDropped(f"{self.device.name}: SFTP session to {self._where} could not start", device=self.device.name)
            return self._sftp

    def _file_error(self, what: str, remote: str, exc: BaseException, size: int = 0) -> TransportError:
        """Map an SFTP failure: link faults are retryable, the rest name the path."""
        chan = self._sftp.get_channel() if self._sftp is not None else None
        if is_link_fault(exc) or not self._link_alive() or (chan is not None and chan.closed):
            return self._dropped(f"{what} {remote}", exc)
        code = getattr(exc, "errno", None)
        if code == errno.ENOENT:
            return RemotePathError(f"{self.device.name}: {what} {remote}: no such file or folder on the board", device=self.device.name)
        if code == errno.EACCES:
            return RemotePathError(f"{self.device.name}: {what} {remote}: permission denied for "
                                   f"{self.spec.user}; pick a folder that user can write (work_dir)", device=self.device.name)
        # OpenSSH's sftp-server reports ENOSPC as a generic "Failure": look at the disk.
        if size and self._short_of_space(remote, size):
            return RemoteNoSpaceError(f"{self.device.name}: no space left on the board writing {remote} "
                                      f"({size} bytes); free space under {posixpath.dirname(remote)}", device=self.device.name)
        return RemotePathError(f"{self.device.name}: {what} {remote} failed: {exc}", device=self.device.name)

    def _short_of_space(self, remote: str, size: int) -> bool:
        try:
            return self.free_bytes(posixpath.dirname(remote) or "/") < size
        except Exception:  # the disk check is a best-effort hint on top of a failure
            return False

    def _push_file(self, local: Path, remote: str, mode: int, progress: ProgressFn | None) -> int:
        size = local.stat().st_size
        with self._sftp_lock:
            sftp = self._sftp_client()
            try:
                try:
                    total = self._put(sftp, local, remote, mode, progress)
                except FileNotFoundError:
                    # Like adb push: create missing parent folders, then write.
                    self._sftp_makedirs(sftp, posixpath.dirname(remote))
                    total = self._put(sftp, local, remote, mode, progress)
            except (OSError, EOFError, paramiko.SSHException) as exc:
                raise self._file_error("push to", remote, exc, size) from None
        if total != size:
            raise ConnectionDropped(f"{self.device.name}: push of {local} to {remote} wrote {total} of {size} bytes",
                                    device=self.device.name)
        return total

    @staticmethod
    def _put(sftp: paramiko.SFTPClient, local: Path, remote: str, mode: int, progress: ProgressFn | None) -> int:
        total = 0
        with open(local, "rb") as fin, sftp.open(remote, "wb", bufsize=0) as fout:
            fout.set_pipelined(True)  # no round trip per 32 KiB request; errors surface at close
            while chunk := fin.read(_CHUNK):
                fout.write(chunk)
                total += len(chunk)
                if progress:
                    progress(len(chunk))
        sftp.chmod(remote, mode)
        written = sftp.stat(remote).st_size or 0
        return total if written == total else written

    @staticmethod
    def _sftp_makedirs(sftp: paramiko.SFTPClient, remote_dir: str) -> None:
        missing = []
        current = remote_dir
        while current and current != "/":
            try:
                sftp.stat(current)
                break
            except FileNotFoundError:
                missing.append(current)
                current = posixpath.dirname(current)
        for d in reversed(missing):
            try:
                sftp.mkdir(d)
            except OSError:
                sftp.stat(d)  # created meanwhile by someone else is fine; otherwise re-raise

    def _pull_file(self, remote: str, local: Path, progress: ProgressFn | None) -> int:
        total = size = 0
        with self._sftp_lock, open(local, "wb") as fout:  # local disk errors propagate as they are
            sftp = self._sftp_client()
            try:
                with sftp.open(remote, "rb") as fin:
                    size = fin.stat().st_size or 0
                    fin.prefetch(size)
                    while chunk := fin.read(_CHUNK):
                        fout.write(chunk)
                        total += len(chunk)
                        if progress:
                            progress(len(chunk))
            except (OSError, EOFError, paramiko.SSHException) as exc:
                fout.close()
                local.unlink(missing_ok=True)
                raise self._file_error("pull", remote, exc) from None
        if total != size:
            raise ConnectionDropped(f"{self.device.name}: pull of {remote} got {total} of {size} bytes", device=self.device.name)
        return total

    def stat(self, remote: str) -> RemoteStat | None:
        def once() -> RemoteStat | None:
            with self._sftp_lock:
                sftp = self._sftp_client()
                try:
                    st = sftp.stat(remote)
                except FileNotFoundError:
                    return None
                except (OSError, EOFError, paramiko.SSHException) as exc:
                    raise self._file_error("stat", remote, exc) from None
            return RemoteStat(remote, int(st.st_size or 0), int(st.st_mode or 0), int(st.st_mtime or 0))

        return self.retry.run(f"stat {remote}", once)

    def rename(self, src: str, dst: str) -> None:
        def once() -> None:
            with self._sftp_lock:
                sftp = self._sftp_client()
                try:
                    # posix_rename replaces an existing dst atomically (plain SFTP rename refuses).
                    sftp.posix_rename(src, dst)
                except (OSError, EOFError, paramiko.SSHException) as exc:
                    raise self._file_error(f"rename to {dst}:", src, exc) from None

        self.retry.run(f"rename {src}", once)

    # ---- facts and health ---------------------------------------------------------------
    def facts(self) -> dict[str, str]:
        res = self.shell(["sh", "-c", _FACTS_SCRIPT], timeout=30)
        lines = res.stdout.split("\n") + [""] * 6
        arch, kernel, hostname, dt_model, prop_model, prop_soc = (s.strip() for s in lines[:6])
        facts = {
            "transport": self.kind.name,
            "address": f"{self.spec.user}@{self._where}",
            "soc_model": self.device.soc_model,
            "model": dt_model or prop_model or hostname,
            "arch": arch,
            "kernel": kernel,
            "hostname": hostname,
        }
        if prop_soc:
            facts["reported_soc_model"] = prop_soc
        return facts


# The connect side's names stay importable from here (tests, older callers).
__all__ = ["SshTransport"]
