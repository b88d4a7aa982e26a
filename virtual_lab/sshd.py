"""A virtual SA8295 board reached over ssh: the real OpenSSH `sshd` on a free loopback port.

Everything it needs (host key, client key pair, config, known_hosts, logs) lives under
one root folder. Commands run as the current host user; the board's "filesystem" for the
harness is a work dir under the root (a Linux board needs no sandbox here).

Fault hooks: `refuse_auth()` swaps authorized_keys for a stranger's key, `rotate_host_key()`
gives the board a new identity (the saved known_hosts no longer matches), `stop()`/`start()`
take it offline and back on the same port.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

SSHD = "/usr/sbin/sshd"  # sshd insists on an absolute path (it re-execs itself)


class VirtualBoardError(RuntimeError):
    """The virtual board could not be set up or started (message says why)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _descendants(root_pid: int) -> list[int]:
    """Pids of all processes below root_pid (from /proc), children first."""
    parent_of: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parent_of[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [root_pid]
    while frontier:
        current = frontier.pop()
        kids = [pid for pid, ppid in parent_of.items() if ppid == current]
        found.extend(kids)
        frontier.extend(kids)
    return found


def _keygen(path: Path, comment: str) -> None:
    for p in (path, path.with_name(path.name + ".pub")):
        p.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True)
    path.chmod(0o600)


class VirtualSshBoard:
    """`with VirtualSshBoard(tmp) as board: open_transport(spec_from(board.inventory_entry("car")))`."""

    def __init__(self, root: Path, *, user: str | None = None, host: str = "127.0.0.1", port: int | None = None,
                 soc_model: str = "SA8295", htp_arch: str = "v68"):
        self.root = Path(root).resolve()
        # A Linux board has no getprop: its sessions get the SoC facts the virtual NPU runtime reads.
        self.soc_model = soc_model
        self.htp_arch = htp_arch
        self.host = host
        self.port = port or free_port(host)
        self.user = user or getpass.getuser()
        self.conf_dir = self.root / "sshd"
        self.host_key_path = self.conf_dir / "host_ed25519"
        self.key_path = self.root / "client" / "id_ed25519"
        self.known_hosts_path = self.root / "client" / "known_hosts"
        self.authorized_keys_path = self.conf_dir / "authorized_keys"
        self.config_path = self.conf_dir / "sshd_config"
        self.pid_path = self.conf_dir / "sshd.pid"
        self.log_path = self.conf_dir / "sshd.log"
        self.work_dir = self.root / "board" / "data" / "harness"
        self._proc: subprocess.Popen[bytes] | None = None
        self._prepared = False

    # ---- setup ------------------------------------------------------------------------
    def _prepare(self) -> None:
        if self._prepared:
            return
        if not Path(SSHD).exists():
            raise VirtualBoardError(f"{SSHD} not found; install openssh-server (apt-get install openssh-server)")
        if shutil.which("ssh-keygen") is None:
            raise VirtualBoardError("ssh-keygen not found; install openssh-client")
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.key_path.parent.mkdir(parents=True, exist_ok=True)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        _keygen(self.host_key_path, "virtual-sa8295-host")
        _keygen(self.key_path, "harness-client")
        shutil.copyfile(self.key_path.with_name(self.key_path.name + ".pub"), self.authorized_keys_path)
        self.write_known_hosts()
        self.config_path.write_text(self._config())
        if os.geteuid() == 0:
            # Privilege separation directory sshd requires when started as root.
            Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        self._prepared = True

    def _config(self) -> str:
        lines = [
            "ListenAddress 127.0.0.1" if self.host == "127.0.0.1" else f"ListenAddress {self.host}",
            f"Port {self.port}",
            f"HostKey {self.host_key_path}",
            f"PidFile {self.pid_path}",
            f"AuthorizedKeysFile {self.authorized_keys_path}",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password",
            "StrictModes no",  # temp dirs are group/world readable
            "UseDNS no",
            "PrintMotd no",
            "MaxSessions 64",
            "MaxStartups 64:30:128",
            "LogLevel ERROR",
            "Subsystem sftp internal-sftp",  # without it SFTP fails with "Channel closed"
            f"SetEnv VLAB_SOC_MODEL={self.soc_model} VLAB_HTP_ARCH={self.htp_arch}",
        ]
        return "\n".join(lines) + "\n"

    def host_public_key(self) -> str:
        """`ssh-ed25519 AAAA...` of the board's current host key."""
        return " ".join(self.host_key_path.with_name(self.host_key_path.name + ".pub").read_text().split()[:2])

    def known_hosts_line(self) -> str:
        name = self.host if self.port == 22 else f"[{self.host}]:{self.port}"
        return f"{name} {self.host_public_key()}\n"

    def write_known_hosts(self) -> None:
        """(Re)write known_hosts with the board's current host key."""
        self.known_hosts_path.write_text(self.known_hosts_line())

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self, timeout: float = 15.0) -> VirtualSshBoard:
        self._prepare()
        if self.running:
            return self
        log = open(self.log_path, "ab")
        try:
            self._proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config_path)],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        finally:
            log.close()
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise VirtualBoardError(f"sshd exited with {self._proc.returncode} on port {self.port}: "
                                        f"{self._log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise VirtualBoardError(f"sshd did not answer on {self.host}:{self.port} within {timeout}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-5:])
        except OSError:
            return "(no log)"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Take the board offline: the listener and every session it started go away (as in
        a reboot), so open connections drop too."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # sshd's listener does not end its per-connection children on SIGTERM; collect them
        # first (they are re-parented once the listener is gone).
        children = _descendants(proc.pid)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for pid in children:
            try:
                os.kill(pid, 9)
            except OSError:
                pass

    def __enter__(self) -> VirtualSshBoard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- faults -------------------------------------------------------------------------
    def refuse_auth(self) -> None:
        """Authorize a stranger's key instead of ours: the next login fails."""
        stranger = self.conf_dir / "stranger_ed25519"
        _keygen(stranger, "stranger")
        shutil.copyfile(stranger.with_name(stranger.name + ".pub"), self.authorized_keys_path)

    def allow_auth(self) -> None:
        shutil.copyfile(self.key_path.with_name(self.key_path.name + ".pub"), self.authorized_keys_path)

    def rotate_host_key(self) -> None:
        """New host identity (as after a re-flash); known_hosts keeps the old key."""
        was_running = self.running
        self.stop()
        _keygen(self.host_key_path, "virtual-sa8295-host-rotated")
        if was_running:
            self.start()

    # ---- inventory ----------------------------------------------------------------------
    def inventory_entry(self, name: str, soc: str = "SA8295", **ssh_extra: Any) -> dict[str, Any]:
        """The devices.yaml mapping for this board (absolute paths)."""
        ssh = {"host": self.host, "port": self.port, "user": self.user, "key": str(self.key_path),
               "known_hosts": str(self.known_hosts_path)}
        ssh.update(ssh_extra)
        return {"name": name, "transport": "ssh", "ssh": ssh, "soc": soc, "work_dir": str(self.work_dir),
                "tags": ["car", "virtual"]}
