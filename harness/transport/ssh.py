"""ssh driver (paramiko) for Linux boards such as the SA8295 cockpit.

Commands run over exec channels (exit status, stdout and stderr apart); files go over
SFTP with pipelined writes. Host keys are checked against the inventory's known_hosts
(reject by default); trusting a new key is an explicit per-device opt-in. known_hosts is
read line by line as OpenSSH reads it: a malformed line (even another host's) is skipped with
a warning naming the file and line, and `@revoked` keys are refused. The connection is opened
lazily and reopened by the next call after a link fault; a link that dies during login is a
dropped connection (retried), only the server's refusal is "unauthorized". A link lost after
a command was sent is CommandOutcomeUnknown: the command is never sent again.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import logging
import posixpath
import select
import socket
import threading
import time
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry

from harness.errors import (
    CommandOutcomeUnknown, ConnectionDropped, DeviceOfflineError, DeviceUnauthorizedError, HostKeyError, RemoteNoSpaceError,
    RemotePathError, TransportError,
)
from harness.inventory import DeviceSpec, SshSpec
from harness.transport.base import ProgressFn, RawExec, RemoteStat, Transport
from harness.transport.command import quote_argv
from harness.transport.retry import RetryPolicy

log = logging.getLogger("harness.transport")

_CHUNK = 1 << 20  # local read size; paramiko splits SFTP writes into 32 KiB requests
_WINDOW = 16 << 20  # a large channel window keeps pipelined SFTP writes flowing
_CONNECT_TIMEOUT = 15.0

# Why a fixed script: one round trip for all facts; it interpolates nothing.
_FACTS_SCRIPT = (
    "uname -m; uname -r; uname -n; "
    "if [ -r /proc/device-tree/model ]; then tr -d '\\000' < /proc/device-tree/model; fi; echo; "
    "if command -v getprop >/dev/null 2>&1; then getprop ro.product.model; getprop ro.soc.model; "
    "else echo; echo; fi"
)


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style `SHA256:...` fingerprint."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class _UnknownHostKey(paramiko.SSHException):
    def __init__(self, hostname: str, key: paramiko.PKey):
        super().__init__(f"unknown host key for {hostname}")
        self.hostname, self.key = hostname, key


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise _UnknownHostKey(hostname, key)


class _TrustAndRecord(paramiko.MissingHostKeyPolicy):
    """Opt-in trust on first use: accept the key and append it to the known_hosts file
    (appending keeps the file's other lines and comments untouched)."""

    def __init__(self, path: Path):
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing = self.path.read_text() if self.path.exists() else ""
        sep = "" if not existing or existing.endswith("\n") else "\n"
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(f"{sep}{hostname} {key.get_name()} {key.get_base64()}\n")


def load_known_hosts(keys: paramiko.HostKeys, path: Path) -> list[paramiko.PKey]:
    """Add the entries of OpenSSH known_hosts `path` to `keys`; returns the `@revoked` keys.
    Like OpenSSH (and unlike paramiko's HostKeys.load, which raises on a truncated key), a line
    that cannot be read is skipped with a warning naming the file and line; fields may be
    separated by any run of blanks. `@cert-authority` lines are skipped (not supported here)."""
    revoked: list[paramiko.PKey] = []
    for lineno, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else None
        if marker not in (None, "@revoked", "@cert-authority"):
            log.warning("%s:%d: skipped a known_hosts line with unknown marker %s", path, lineno, marker)
            continue
        if marker == "@cert-authority":
            log.warning("%s:%d: skipped a @cert-authority line (host certificates are not supported); "
                        "list the host's own key instead", path, lineno)
            continue
        try:
            entry = HostKeyEntry.from_line(" ".join(fields[:3]), lineno)
        except Exception as exc:  # InvalidHostKey, SSHException, struct/ValueError on a cut key
            entry, why = None, f"{type(exc).__name__}: {exc}"
        else:
            why = "too few fields or an unknown key type"
            # paramiko reads a cut key blob as a shorter key; OpenSSH's parser refuses it.
            if entry is not None and entry.key is not None and entry.key.asbytes() != _b64(fields[2]):
                entry, why = None, "the key data is cut short or has trailing bytes"
        if entry is None or entry.key is None:
            log.warning("%s:%d: skipped a malformed known_hosts line (%s); OpenSSH skips it too",
                        path, lineno, why)
            continue
        if marker == "@revoked":
            revoked.append(entry.key)
            continue
        for name in entry.hostnames:
            keys.add(name, entry.key.get_name(), entry.key)
    return revoked


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return None


def _is_link_fault(exc: BaseException) -> bool:
    # SFTP status errors are OSErrors too, but carry an errno (or none at all) and no
    # socket semantics; these are the ones that mean the link itself broke.
    return isinstance(exc, (EOFError, paramiko.SSHException, socket.timeout, ConnectionError, BrokenPipeError))


def connect_client(spec: SshSpec, *, name: str, inventory: str, timeout: float = _CONNECT_TIMEOUT,
                   section: str = "ssh", role: str = "board") -> paramiko.SSHClient:
    """A logged-in paramiko client, the host key checked against `spec.known_hosts` (unknown
    keys refused unless `trust_new_host_key`, @revoked keys refused). Shared by ssh boards and
    ssh tunnels (tunnel.py), so both check host keys the same way. `section` is the
    devices.yaml key the settings live under, and `role` what the host is ("board", "lab host"), for messages."""
    known = spec.known_hosts or Path.home() / ".ssh" / "known_hosts"
    where = f"{spec.host}:{spec.port}"
    known_name = spec.host if spec.port == 22 else f"[{spec.host}]:{spec.port}"
    client = paramiko.SSHClient()
    revoked: list[paramiko.PKey] = []
    if known.exists():
        try:
            revoked = load_known_hosts(client.get_host_keys(), known)
        except OSError as exc:
            raise HostKeyError(f"{name}: cannot read known_hosts file {known} ({exc}); "
                               "check its permissions") from None
    elif not spec.trust_new_host_key:
        raise HostKeyError(
            f"{name}: known_hosts file {known} does not exist, so the host key of {where} cannot be "
            f"verified; create it with `ssh-keyscan -p {spec.port} {spec.host} >> {known}` after checking "
            f"the fingerprint, or set `trust_new_host_key: true` under `{section}:` in {inventory} once")
    client.set_missing_host_key_policy(_TrustAndRecord(known) if spec.trust_new_host_key else _RejectUnknown())
    if spec.key is not None and not spec.key.exists():
        raise DeviceUnauthorizedError(
            f"{name}: ssh key file {spec.key} does not exist; fix `{section}.key` in {inventory}")
    try:
        client.connect(
            spec.host, port=spec.port, username=spec.user,
            key_filename=str(spec.key) if spec.key else None,
            look_for_keys=spec.key is None, allow_agent=spec.key is None,
            timeout=timeout, banner_timeout=timeout,
            auth_timeout=timeout,
        )
    except _UnknownHostKey as exc:
        client.close()
        raise HostKeyError(
            f"{name}: host key of {where} ({exc.key.get_name()} {fingerprint(exc.key)}) is not in "
            f"{known}; refusing to connect. Check the fingerprint on the {role} "
            f"(`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), then add it with "
            f"`ssh-keyscan -p {spec.port} {spec.host} >> {known}` or set `trust_new_host_key: true` under "
            f"`{section}:` in {inventory} once") from None
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise HostKeyError(
            f"{name}: host key of {where} CHANGED: the {role} offers {exc.key.get_name()} "
            f"{fingerprint(exc.key)} but {known} has {fingerprint(exc.expected_key)}. Someone may be "
            f"intercepting the connection, or the {role} was re-flashed; if you expected this, remove the "
            f"old entry with `ssh-keygen -R '{known_name}' -f {known}` and connect again "
            f"(with `trust_new_host_key: true` to record the new key)") from None
    except paramiko.AuthenticationException as exc:
        transport = client.get_transport()
        link_alive = transport is not None and transport.is_active()
        client.close()
        if not link_alive:
            # paramiko reports a link that died mid-login as an authentication failure
            # ("transport shut down or saw EOF"); nothing was refused.
            raise ConnectionDropped(
                f"{name}: ssh link to {where} dropped during login ({type(exc).__name__}: {exc})"
            ) from None
        key = spec.key or "your default keys/agent"
        raise DeviceUnauthorizedError(
            f"{name}: ssh login as {spec.user}@{where} with {key} was refused ({exc}); "
            f"add the public key to ~{spec.user}/.ssh/authorized_keys on the {role}, or fix `{section}.user`/"
            f"`{section}.key` in {inventory}") from None
    except (OSError, EOFError, paramiko.SSHException) as exc:
        client.close()
        raise DeviceOfflineError(
            f"{name}: cannot reach ssh {where} ({type(exc).__name__}: {exc}); check that the {role} "
            "is powered, on the network and running sshd") from None
    transport = client.get_transport()
    offered = transport.get_remote_server_key() if transport is not None else None
    if offered is not None and any(offered == key for key in revoked):
        client.close()
        raise HostKeyError(
            f"{name}: host key of {where} ({offered.get_name()} {fingerprint(offered)}) is marked "
            f"@revoked in {known}; refusing to connect. Give the {role} a new host key and record it")
    if transport is not None:
        transport.set_keepalive(15)  # notice a dead board during long runs
    return client


class SshTransport(Transport):
    kind = "ssh"

    def __init__(self, device: DeviceSpec, retry: RetryPolicy | None = None,
                 connect_timeout: float = _CONNECT_TIMEOUT):
        super().__init__(device, retry)
        if device.ssh is None:
            raise TransportError(f"{device.name}: no `ssh:` settings in {device.source or 'devices.yaml'}; "
                                 "add host, user and key for this device")
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
                                 f"({type(exc).__name__}: {exc})")

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
                "Check the board's state and run it again only if that is safe") from None
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
                return RawExec(bytes(out), bytes(err), chan.recv_exit_status())
            if chan.closed and not chan.exit_status_ready():
                raise EOFError("channel closed without an exit status")
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
                                            "SFTP could open; run again")
                try:
                    self._sftp = paramiko.SFTPClient.from_transport(transport, window_size=_WINDOW)
                except (OSError, EOFError, paramiko.SSHException) as exc:
                    raise self._dropped("opening SFTP (is `Subsystem sftp` enabled in sshd_config?)", exc) from None
                if self._sftp is None:
                    raise ConnectionDropped(f"{self.device.name}: SFTP session to {self._where} could not start")
            return self._sftp

    def _file_error(self, what: str, remote: str, exc: BaseException, size: int = 0) -> TransportError:
        """Map an SFTP failure: link faults are retryable, the rest name the path."""
        chan = self._sftp.get_channel() if self._sftp is not None else None
        if _is_link_fault(exc) or not self._link_alive() or (chan is not None and chan.closed):
            return self._dropped(f"{what} {remote}", exc)
        code = getattr(exc, "errno", None)
        if code == errno.ENOENT:
            return RemotePathError(f"{self.device.name}: {what} {remote}: no such file or folder on the board")
        if code == errno.EACCES:
            return RemotePathError(f"{self.device.name}: {what} {remote}: permission denied for "
                                   f"{self.spec.user}; pick a folder that user can write (work_dir)")
        # OpenSSH's sftp-server reports ENOSPC as a generic "Failure": look at the disk.
        if size and self._short_of_space(remote, size):
            return RemoteNoSpaceError(f"{self.device.name}: no space left on the board writing {remote} "
                                      f"({size} bytes); free space under {posixpath.dirname(remote)}")
        return RemotePathError(f"{self.device.name}: {what} {remote} failed: {exc}")

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
            raise ConnectionDropped(f"{self.device.name}: push of {local} to {remote} wrote {total} of {size} bytes")
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
            raise ConnectionDropped(f"{self.device.name}: pull of {remote} got {total} of {size} bytes")
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
            "transport": "ssh",
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


__all__ = ["SshTransport", "connect_client", "fingerprint", "load_known_hosts"]
