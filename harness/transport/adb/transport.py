"""adb driver: talks to a real adb server (local or a lab host's) over its host protocol
(host.py); the server's view of a device and its errors are in state.py.

- TCP serials (HOST:PORT) are `adb connect`ed on demand; a device the server keeps as
  `offline` (it restarted) is recovered with disconnect + connect.
- Exit codes are real: shell v2 when the device advertises `shell_v2`, else the v1 path with
  a per-call random exit marker (shell.py reads both off the stream this class opens).
- Files go over our own sync client: the file half of this driver is files.py.
- Link faults are raised retryable (the base retry policy re-runs the primitive);
  `unauthorized` is not retryable and says what to do on the phone.
"""

from __future__ import annotations

import threading
import time

from harness.errors import (
    CommandOutcomeUnknown,
    ConnectionDropped,
    DeviceOfflineError,
    TransportError,
)
from harness.inventory import ADB, DEFAULT_ADB_SERVER_PORT, AdbServer, DeviceSpec
from harness.transport.adb.files import LINK_ERRORS, AdbFileTransport, close_connection
from harness.transport.adb.gate import connect_slot, restart_server
from harness.transport.adb.host import AdbClient, AdbConnection, AdbError, AdbFault
from harness.transport.adb.props import FACT_PROPS, parse_getprop
from harness.transport.adb.shell import read_v1, read_v2, v1_service, v2_service
from harness.transport.adb.state import is_loopback, is_tcp_serial, link_state, state_error, state_from_fail
from harness.transport.adb.sync import SyncClient
from harness.transport.retry import RetryPolicy
from harness.transport.types import HealthReport, LinkState, RawExec, link_state_of


class AdbTransport(AdbFileTransport):
    kind = ADB

    def __init__(self, device: DeviceSpec, retry: RetryPolicy | None = None, *,
                 shell_v2: bool | None = None, connect_wait_s: float = 5.0, adb_binary: str = "adb"):
        """`shell_v2`: None = use it when the device advertises it; False forces the v1 path."""
        super().__init__(device, retry)
        if not device.serial:
            raise TransportError(f"{device.name}: no `serial:` in {device.source or 'devices.yaml'}; "
                                 "add the serial `adb devices` shows (HOST:PORT for a TCP device)", device=device.name)
        self.serial = device.serial
        self.server = device.adb_server or AdbServer()
        self.client = AdbClient(self.server.host, self.server.port)
        self.connect_wait_s = connect_wait_s
        self.adb_binary = adb_binary
        self._shell_v2_wanted = shell_v2
        self._features: frozenset[str] | None = None
        self._ready = False
        self._lock = threading.RLock()
        self._held_sync: tuple[AdbConnection, SyncClient] | None = None  # idle sync session, reused
        self._server_seen = False  # the server answered this transport once (so a refusal means it died)
        self._restarted = False

    # ---- server and device state --------------------------------------------------------
    @property
    def _label(self) -> str:
        return f"{self.device.name} ({self.serial} via adb server {self.server})"

    def _server_conn(self, timeout: float | None = None) -> AdbConnection:
        try:
            conn = self.client.make_connection(timeout=timeout)
        except AdbError as exc:
            if exc.fault is AdbFault.NOT_LISTENING and self._server_seen:
                return self._after_restart(exc, timeout)
            if self._may_start_server():
                return self.client.make_connection(timeout=timeout)
            raise DeviceOfflineError(
                f"{self._label}: the adb server does not answer ({exc}); start it on {self.server.host} with "
                f"`adb -P {self.server.port} start-server` (or fix `adb_server` in "
                f"{self.device.source or 'devices.yaml'})", device=self.device.name) from None
        self._server_seen = True
        return conn

    def _after_restart(self, exc: AdbError, timeout: float | None) -> AdbConnection:
        """The server answered this transport before and its port now refuses: it died (adb 29
        aborts under bursts of failing connects, gate.py). A local one is started again, once per
        transport, and said so; nothing is killed (no process listens there). Devices it had
        are reconnected by the next call's state check."""
        import logging  # only on this path: ~3 ms of every start-up otherwise

        log = logging.getLogger("harness.transport")
        where = f"adb server {self.server.host}:{self.server.port}"
        if self._restarted or not self._may_restart_server():
            raise DeviceOfflineError(
                f"{self._label}: the {where} answered before and now refuses connections ({exc}): it has stopped"
                + (" again after the harness restarted it once" if self._restarted else "")
                + f"; start it again with `adb -P {self.server.port} start-server` on {self.server.host} and "
                "read its log (/tmp/adb.<uid>.log) for why it stopped", device=self.device.name) from None
        self._restarted = True
        self._ready = False
        said = restart_server(self.adb_binary, self.server.host, self.server.port, device=self.device.name)
        if said is not None:
            log.warning("%s: %s", self.device.name, said)
        return self.client.make_connection(timeout=timeout)

    def _may_restart_server(self) -> bool:
        """Only a server on this host, which an `adb start-server` here can bring back."""
        return is_loopback(self.server.host)

    def _may_start_server(self) -> bool:
        """Like the adb CLI: only the default local server is started on demand."""
        if self.server.port != DEFAULT_ADB_SERVER_PORT or not is_loopback(self.server.host):
            return False
        import subprocess  # only to start a server: ~4 ms of every start-up otherwise

        try:
            subprocess.run([self.adb_binary, "-P", str(self.server.port), "start-server"], timeout=30,
                           stdin=subprocess.DEVNULL, capture_output=True, check=True)
        except (OSError, subprocess.SubprocessError):
            return False
        return True

    def _host_query(self, service: str) -> str:
        """A `host...:` request answered with OKAY + a length-prefixed string."""
        conn = self._server_conn(timeout=30)
        try:
            conn.send_command(service)
            conn.check_okay()
            return conn.read_string_block()
        except AdbError:
            raise
        except LINK_ERRORS as exc:
            raise DeviceOfflineError(f"{self._label}: adb server connection failed during `{service}` "
                                     f"({type(exc).__name__}: {exc})", device=self.device.name) from None
        finally:
            close_connection(conn)

    def adb_state(self) -> str:
        """The server's view: device | offline | unauthorized | authorizing | connecting | absent ..."""
        try:
            return self._host_query(f"host-serial:{self.serial}:get-state").strip() or "unknown"
        except AdbError as exc:
            return state_from_fail(exc.refusal or "")

    def _ensure_ready(self) -> None:
        """Make sure the server lists the device as `device` (connecting TCP serials on demand)."""
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            state = self.adb_state()
            # `unauthorized` turns into `device` by itself once the user accepts the prompt;
            # reconnecting would only raise the prompt again.
            if state not in ("device", "unauthorized") and is_tcp_serial(self.serial):
                state = self._reconnect(state)
            if state == "device":
                self._ready = True
                return
            raise self._state_error(state)

    def _reconnect(self, state: str) -> str:
        # A few connects at a time per server (gate.py): a burst of failing ones kills adb 29.
        # Keyed by the server's whole address: a lab host's 127.0.0.1:5037 (via ssh) is not this host's.
        with connect_slot(str(self.server), self.server.port, device=self.device.name):
            if state not in ("absent", "unknown"):
                # A device that restarted stays `offline` on the server until it is dropped and re-added.
                try:
                    self._host_query(f"host:disconnect:{self.serial}")
                except AdbError:
                    pass
            try:
                message = self._host_query(f"host:connect:{self.serial}")
            except AdbError as exc:
                message = exc.refusal or str(exc)
        if any(word in message.lower() for word in ("unable", "failed", "cannot", "error")):
            if "authenticate" in message.lower() or self.adb_state() == "unauthorized":
                raise self._state_error("unauthorized")
            raise DeviceOfflineError(f"{self._label}: `adb connect {self.serial}` failed: {message.strip()}; "
                                     "check the device is on the network and adb over TCP is enabled", device=self.device.name)
        deadline = time.monotonic() + self.connect_wait_s
        while True:
            state = self.adb_state()
            if state in ("device", "unauthorized") or time.monotonic() >= deadline:
                return state
            time.sleep(0.05)

    def _state_error(self, state: str) -> TransportError:
        self._ready = False
        return state_error(self._label, self.serial, state, self.device.name)

    def _fail_error(self, exc: AdbError, what: str) -> TransportError:
        """Classify a FAIL the server sent while opening a device service (its words name
        the device's state), or another reply it could not give."""
        state = state_from_fail(exc.refusal or "")
        if state != "unknown":
            return self._state_error(state)
        return TransportError(f"{self._label}: adb refused {what}: {str(exc).strip()}", device=self.device.name)

    def _dropped(self, what: str, exc: BaseException) -> ConnectionDropped:
        # The next call re-checks the device's state (and reconnects a TCP device).
        self._ready = False
        return ConnectionDropped(f"{self._label}: connection dropped during {what} ({type(exc).__name__}: {exc})", device=self.device.name)

    def _open(self, service: str, what: str, timeout: float | None = None, *,
              runs_once: bool = False) -> AdbConnection:
        """A server connection switched to this device and then to `service`.
        `runs_once`: the service runs a command; once its request has left, a lost link means
        the command may have started (CommandOutcomeUnknown), not a retryable drop."""
        self._ensure_ready()
        conn = self._server_conn(timeout=30)
        sent = False
        try:
            conn.send_command(f"host:transport:{self.serial}")
            conn.check_okay()
            sent = True  # from here the device may get the request
            conn.send_command(service)
            conn.check_okay()
        except AdbError as exc:
            close_connection(conn)
            # The stream ended where OKAY/FAIL was due, or the server's `FAIL closed`: the device
            # side went away before its OKAY (adb sockets.cpp local_socket_close_notify).
            if exc.fault is AdbFault.CUT or (exc.refusal or "").strip() == "closed":
                raise self._lost(what, exc, sent and runs_once) from None
            raise self._fail_error(exc, what) from None  # a FAIL: refused, never started
        except LINK_ERRORS as exc:
            close_connection(conn)
            raise self._lost(what, exc, sent and runs_once) from None
        conn.conn.settimeout(timeout)
        return conn

    def _lost(self, what: str, exc: BaseException, may_have_run: bool) -> TransportError:
        return self._outcome_unknown(what, exc) if may_have_run else self._dropped(what, exc)

    def _outcome_unknown(self, what: str, exc: BaseException) -> CommandOutcomeUnknown:
        self._ready = False
        return CommandOutcomeUnknown(
            f"{self._label}: connection lost during {what} after it was handed to the device "
            f"({type(exc).__name__}: {exc}); it may have run (wholly or in part), so it is not sent again. "
            "Check the device's state (files, processes) and run it again only if that is safe", device=self.device.name)

    def features(self) -> frozenset[str]:
        """The device's adb features (asked once, then cached)."""
        if self._features is None:
            self._ensure_ready()
            try:
                text = self._host_query(f"host-serial:{self.serial}:features")
            except AdbError as exc:
                raise self._fail_error(exc, "a features query") from None
            # Some servers pass the device banner's trailing NUL through; drop it.
            self._features = frozenset(f.strip("\0 \n") for f in text.split(",") if f.strip("\0 \n"))
        return self._features

    def uses_shell_v2(self) -> bool:
        if self._shell_v2_wanted is not None:
            return self._shell_v2_wanted
        return "shell_v2" in self.features()

    def close(self) -> None:
        # Only the idle sync session stays open between calls (one per transport).
        self._ready = False
        with self._lock:
            held, self._held_sync = self._held_sync, None
        if held is not None:
            held[1].quit()
            close_connection(held[0])

    # ---- commands -----------------------------------------------------------------------
    def _exec(self, command: str, timeout: float | None) -> RawExec:
        if self.uses_shell_v2():
            return self._exec_v2(command, timeout)
        return self._exec_v1(command, timeout)

    def _exec_v2(self, command: str, timeout: float | None) -> RawExec:
        deadline = None if timeout is None else time.monotonic() + timeout
        conn = self._open(v2_service(command), "a shell command", runs_once=True)
        try:
            return read_v2(conn.conn, deadline)
        except LINK_ERRORS as exc:
            raise self._outcome_unknown("a shell command", exc) from None
        finally:
            close_connection(conn)

    def _exec_v1(self, command: str, timeout: float | None) -> RawExec:
        """The v1 `shell:` path (shell.v1_service): a stream that ends without the exit
        marker line means the command may have run."""
        deadline = None if timeout is None else time.monotonic() + timeout
        service, marker = v1_service(command)
        conn = self._open(service, "a shell command", runs_once=True)
        try:
            return read_v1(conn.conn, deadline, marker)
        except LINK_ERRORS as exc:
            raise self._outcome_unknown("a shell command", exc) from None
        finally:
            close_connection(conn)

    # ---- facts and health ---------------------------------------------------------------
    def props(self) -> dict[str, str]:
        """All properties from one `getprop` call."""
        return parse_getprop(self.shell(["getprop"], timeout=30).stdout)

    def facts(self) -> dict[str, str]:
        props = self.props()
        facts = {"transport": self.kind.name, "serial": self.serial, "adb_server": str(self.server),
                 "soc_model": self.device.soc_model}
        facts.update({name: props[key] for name, key in FACT_PROPS.items() if props.get(key)})
        facts.setdefault("model", self.serial)
        return facts

    def _link_health(self) -> HealthReport:
        """The server's view first (unauthorized, offline, absent: its state, not a shell's
        silence), then the shell as on every link."""
        try:
            self._ensure_ready()
        except TransportError as exc:
            state = link_state_of(exc)
            report = HealthReport(device=self.device.name, reachable=False,
                                  state=state if state is LinkState.UNAUTHORIZED else self._safe_state())
            report.problems.append(str(exc))
            return report
        return super()._link_health()

    def health(self) -> HealthReport:
        report = super().health()
        if report.device_facts.boot_completed is False:
            # The harness's own refusal (pytest plugin), whatever a lab plan's policy says.
            report.problems.append(f"{self.device.name}: sys.boot_completed is not 1; the device has not finished booting")
        return report

    def _safe_state(self) -> LinkState:
        try:
            return link_state(self.adb_state())
        except TransportError:
            return LinkState.UNREACHABLE


__all__ = ["AdbTransport"]
