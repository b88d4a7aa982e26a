"""The shell services: `shell:` (v1: stdout and stderr merged, no exit code), `exec:` (like
v1) and `shell,v2,...:` (packets: 0 stdin, 1 stdout, 2 stderr, 3 exit, 4 close-stdin,
5 window size). A command runs in the device's sandbox shell in its own process group,
which is hung up when the client goes away."""

from __future__ import annotations

import os
import selectors
import signal
import struct
import subprocess
import threading
from typing import IO

from virtual_lab.adbd.contract import AdbdDevice
from virtual_lab.adbd.stream import Stream

SHELL_PKT = struct.Struct("<BI")
ID_STDIN, ID_STDOUT, ID_STDERR, ID_EXIT, ID_CLOSE_STDIN, ID_WINDOW = 0, 1, 2, 3, 4, 5


def serve_shell(device: AdbdDevice, stream: Stream, command: str, v2: bool) -> None:
    if not command.strip():
        # An interactive shell (no pty here): read commands from stdin.
        command = "exec sh"
    try:
        # The stderr_after_stdout fault keeps the streams apart on v1 to send stderr last.
        late_stderr = not v2 and device.faults.settings.stderr_after_stdout
        proc = device.sandbox.popen(command, merge_stderr=not v2 and not late_stderr)
    except OSError as exc:
        msg = f"virtual device {device.name}: cannot start the sandbox shell: {exc}\n".encode()
        if v2:
            stream.write(SHELL_PKT.pack(ID_STDERR, len(msg)) + msg + SHELL_PKT.pack(ID_EXIT, 1) + bytes([127]))
        else:
            stream.write(msg)
        return
    wake_r, wake_w = os.pipe()
    stdin_thread = threading.Thread(target=_pump_stdin, args=(stream, proc, v2, wake_w), daemon=True,
                                    name="adbd-shell-stdin")
    stdin_thread.start()
    try:
        hung_up = _pump_output(stream, proc, v2, wake_r, late_stderr)
        if hung_up:
            _hang_up(proc)
            return
        rc = proc.wait()
        if v2:
            code = 128 - rc if rc < 0 else rc
            stream.write(SHELL_PKT.pack(ID_EXIT, 1) + bytes([code & 0xFF]))
    finally:
        stream.close()  # lets the stdin thread finish before its wake-up pipe goes away
        stdin_thread.join(timeout=5)
        if not stdin_thread.is_alive():
            os.close(wake_r)
            os.close(wake_w)
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


def _pump_output(stream: Stream, proc: subprocess.Popen, v2: bool, wake_r: int, late_stderr: bool = False) -> bool:
    """Copy stdout/stderr to the stream until both reach EOF. True if the client hung up.
    `late_stderr` (v1 only): hold stderr back and send it once both have ended."""
    sel = selectors.DefaultSelector()
    chunk = max(1024, stream.conn.max_out - SHELL_PKT.size)
    ids = {}
    for f, pid in ((proc.stdout, ID_STDOUT), (proc.stderr, ID_STDERR)):
        if f is not None:
            sel.register(f.fileno(), selectors.EVENT_READ)
            ids[f.fileno()] = pid
    sel.register(wake_r, selectors.EVENT_READ)
    held = bytearray()
    try:
        while ids:
            for key, _ in sel.select():
                fd = key.fd
                if fd == wake_r:
                    return True
                data = os.read(fd, chunk)
                if not data:
                    sel.unregister(fd)
                    del ids[fd]
                    continue
                if late_stderr and ids[fd] == ID_STDERR:
                    held += data
                    continue
                packet = SHELL_PKT.pack(ids[fd], len(data)) + data if v2 else data
                if not stream.write(packet):
                    return True
        return bool(held) and not stream.write(held)
    finally:
        sel.close()


def _pump_stdin(stream: Stream, proc: subprocess.Popen, v2: bool, wake_w: int) -> None:
    stdin = proc.stdin
    assert stdin is not None
    try:
        while True:
            if v2:
                head = stream.read_exact(SHELL_PKT.size)
                if head is None:
                    break
                pid, length = SHELL_PKT.unpack(head)
                data = stream.read_exact(length) if length else b""
                if data is None:
                    break
                if pid == ID_STDIN and data:
                    _write_stdin(stdin, data)
                elif pid == ID_CLOSE_STDIN:
                    _close_quietly(stdin)
            else:
                piece = stream.read_chunk(1 << 20)
                if piece is None:
                    break
                _write_stdin(stdin, piece)
    finally:
        _close_quietly(stdin)
        if stream.remote_closed and not stream.local_closed:
            try:
                os.write(wake_w, b"x")  # the client went away: stop the output pump
            except OSError:
                pass


def _write_stdin(stdin: IO[bytes], data: bytes | memoryview) -> None:
    try:
        stdin.write(data)
    except (BrokenPipeError, ValueError, OSError):
        pass  # the program closed its stdin or exited; a real shell drops the bytes too


def _close_quietly(f: IO[bytes]) -> None:
    try:
        f.close()
    except OSError:
        pass


def _hang_up(proc: subprocess.Popen) -> None:
    """The client closed the stream: SIGHUP the command's process group (nohup'ed children survive)."""
    try:
        os.killpg(proc.pid, signal.SIGHUP)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        try:
            proc.kill()
        except ProcessLookupError:
            pass
        proc.wait()

