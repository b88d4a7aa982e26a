"""Device links behind one interface: `Transport` (base.py) with adb, ssh and local drivers."""

from harness.transport.base import CommandResult, HealthReport, RemoteStat, Transport
from harness.transport.factory import open_transport

__all__ = ["CommandResult", "HealthReport", "RemoteStat", "Transport", "open_transport"]
