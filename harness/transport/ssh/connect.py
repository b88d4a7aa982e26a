"""Opening an ssh link as OpenSSH would: host keys checked against the inventory's known_hosts
(read line by line as OpenSSH reads it: a malformed line skipped with a warning naming the file and
line, `@revoked` keys refused; trusting a new key is an explicit per-device opt-in), the login, and
paramiko's own log kept off the terminal. Used by ssh boards (transport.py) and ssh tunnels (harness/transport/tunnel.py).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import socket
from dataclasses import dataclass
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry

from harness.errors import ConnectionDropped, DeviceOfflineError, DeviceUnauthorizedError, HostKeyError
from harness.inventory import SshSpec

log = logging.getLogger("harness.transport")
# paramiko's own log (a traceback at ERROR when a host sends no banner, even after connect
# returned) stops at this logger: the harness's error is the user's line. Not propagated, since a
# root handler may exist unasked (labgrid logs through the root logger, which installs one);
# attach a handler here to debug an ssh link.
PARAMIKO_LOG = "harness.transport.paramiko"
logging.getLogger(PARAMIKO_LOG).addHandler(logging.NullHandler())
logging.getLogger(PARAMIKO_LOG).propagate = False

CONNECT_TIMEOUT = 15.0


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


def is_link_fault(exc: BaseException) -> bool:
    # SFTP status errors are OSErrors too, but carry an errno (or none at all) and no
    # socket semantics; these are the ones that mean the link itself broke.
    return isinstance(exc, (EOFError, paramiko.SSHException, socket.timeout, ConnectionError, BrokenPipeError))


@dataclass(frozen=True)
class _Login:
    """One login's settings and the words its messages use: `section` is the devices.yaml key
    the settings live under, `role` what the host is ("board", "lab host")."""

    spec: SshSpec
    name: str
    inventory: str
    section: str
    role: str

    @property
    def known(self) -> Path:
        return self.spec.known_hosts or Path.home() / ".ssh" / "known_hosts"

    @property
    def where(self) -> str:
        return f"{self.spec.host}:{self.spec.port}"


def connect_client(spec: SshSpec, *, name: str, inventory: str, timeout: float = CONNECT_TIMEOUT,
                   section: str = "ssh", role: str = "board") -> paramiko.SSHClient:
    """A logged-in paramiko client, the host key checked against `spec.known_hosts` (unknown
    keys refused unless `trust_new_host_key`, @revoked keys refused). Shared by ssh boards and
    ssh tunnels (tunnel.py), so both check host keys the same way. `section` is the
    devices.yaml key the settings live under, and `role` what the host is ("board", "lab host"), for messages."""
    login = _Login(spec, name, inventory, section, role)
    client = paramiko.SSHClient()
    client.set_log_channel(PARAMIKO_LOG)  # its transport and SFTP log there (see PARAMIKO_LOG)
    revoked = _trust(client, login)
    if spec.key is not None and not spec.key.exists():
        raise DeviceUnauthorizedError(
            f"{name}: ssh key file {spec.key} does not exist; fix `{section}.key` in {inventory}", device=name)
    _login(client, login, timeout)
    transport = client.get_transport()
    offered = transport.get_remote_server_key() if transport is not None else None
    if offered is not None and any(offered == key for key in revoked):
        client.close()
        raise HostKeyError(
            f"{name}: host key of {login.where} ({offered.get_name()} {fingerprint(offered)}) is marked "
            f"@revoked in {login.known}; refusing to connect. Give the {role} a new host key and record it", device=name)
    if transport is not None:
        transport.set_keepalive(15)  # notice a dead board during long runs
    return client


def _trust(client: paramiko.SSHClient, login: _Login) -> list[paramiko.PKey]:
    """Load the known_hosts keys into `client` and set its policy for an unknown key; returns
    the @revoked keys."""
    spec, known = login.spec, login.known
    revoked: list[paramiko.PKey] = []
    if known.exists():
        try:
            revoked = load_known_hosts(client.get_host_keys(), known)
        except OSError as exc:
            raise HostKeyError(f"{login.name}: cannot read known_hosts file {known} ({exc}); "
                               "check its permissions", device=login.name) from None
    elif not spec.trust_new_host_key:
        raise HostKeyError(
            f"{login.name}: known_hosts file {known} does not exist, so the host key of {login.where} cannot be "
            f"verified; create it with `ssh-keyscan -p {spec.port} {spec.host} >> {known}` after checking "
            f"the fingerprint, or set `trust_new_host_key: true` under `{login.section}:` in {login.inventory} once",
            device=login.name)
    client.set_missing_host_key_policy(_TrustAndRecord(known) if spec.trust_new_host_key else _RejectUnknown())
    return revoked


def _login(client: paramiko.SSHClient, login: _Login, timeout: float) -> None:
    """Connect and authenticate; each way it can fail becomes the error that says what to do."""
    spec, known, where, name, role, section = login.spec, login.known, login.where, login.name, login.role, login.section
    known_name = spec.host if spec.port == 22 else f"[{spec.host}]:{spec.port}"
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
            f"`{section}:` in {login.inventory} once", device=name) from None
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise HostKeyError(
            f"{name}: host key of {where} CHANGED: the {role} offers {exc.key.get_name()} "
            f"{fingerprint(exc.key)} but {known} has {fingerprint(exc.expected_key)}. Someone may be "
            f"intercepting the connection, or the {role} was re-flashed; if you expected this, remove the "
            f"old entry with `ssh-keygen -R '{known_name}' -f {known}` and connect again "
            f"(with `trust_new_host_key: true` to record the new key)", device=name) from None
    except paramiko.AuthenticationException as exc:
        transport = client.get_transport()
        link_alive = transport is not None and transport.is_active()
        client.close()
        if not link_alive:
            # paramiko reports a link that died mid-login as an authentication failure
            # ("transport shut down or saw EOF"); nothing was refused.
            raise ConnectionDropped(
                f"{name}: ssh link to {where} dropped during login ({type(exc).__name__}: {exc})",
                device=name) from None
        key = spec.key or "your default keys/agent"
        raise DeviceUnauthorizedError(
            f"{name}: ssh login as {spec.user}@{where} with {key} was refused ({exc}); "
            f"add the public key to ~{spec.user}/.ssh/authorized_keys on the {role}, or fix `{section}.user`/"
            f"`{section}.key` in {login.inventory}", device=name) from None
    except (OSError, EOFError, paramiko.SSHException) as exc:
        client.close()
        if "No existing session" in str(exc) or "protocol banner" in str(exc):
            # paramiko's words for a transport that never came up (its banner/key-exchange
            # thread gave up): the port answers, the SSH session did not.
            raise DeviceOfflineError(
                f"{name}: ssh {where} accepted the connection but no SSH session came up within {timeout:g} s "
                f"(no banner or key exchange: sshd overloaded or at MaxStartups, or not an SSH server on that "
                f"port); check sshd on the {role} and `{section}.port` in {login.inventory}", device=name) from None
        raise DeviceOfflineError(
            f"{name}: cannot reach ssh {where} ({type(exc).__name__}: {exc}); check that the {role} "
            "is powered, on the network and running sshd", device=name) from None
