"""The ssh driver (paramiko), this package's one face: transport.py (SshTransport: commands over
exec channels, files over SFTP) and connect.py (opening a link as OpenSSH would: host keys, the
login, paramiko's log), which ssh tunnels (harness/transport/tunnel.py) use too."""

from __future__ import annotations

from harness.transport.ssh.connect import CONNECT_TIMEOUT, PARAMIKO_LOG, connect_client, fingerprint, load_known_hosts
from harness.transport.ssh.transport import SshTransport

__all__ = ["CONNECT_TIMEOUT", "PARAMIKO_LOG", "SshTransport", "connect_client", "fingerprint", "load_known_hosts"]
