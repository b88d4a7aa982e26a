"""Does a burst of failing `adb connect`s kill the adb server? (issue 44, docs/lab-scale.md)

Debian's real `adb` server on a free port, N TCP devices that are `offline` as the virtual lab's
adbd is (it accepts a connection and resets it: virtual_lab/adbd/server.py, its `hard_close`;
a listener each here, as 128 whole virtual devices take minutes to start on a loaded host),
and N harness transports asking
the server to connect them all at once, a few rounds. Reported per round: how many got an
answer, whether the server still answers (`adb devices`), and whether it logged adb's abort
(`fdevent_epoll.cpp ... Bad file descriptor`). `--slots 0` runs without the harness's per-server
connect slots (as before the fix).

    python benchmarks/adb_connect_burst.py --devices 128 --rounds 3 [--slots 0]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from harness.errors import TransportError  # noqa: E402
from harness.inventory import load_inventory  # noqa: E402
from harness.transport import AdbTransport, RetryPolicy  # noqa: E402
from harness.transport.adb import gate  # noqa: E402
from virtual_lab.adb_server import AdbServer  # noqa: E402
from virtual_lab.adbd.wire import hard_close  # noqa: E402


class OfflineDevice:
    """A TCP port whose "adbd" resets every connection, as an offline virtual device's does."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.serial = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            hard_close(client)

    def stop(self) -> None:
        self.sock.close()


def _server_pid(port: int) -> int | None:
    from harness.lab.adb_limits import _listening_inode, _owner

    inode = _listening_inode(port)
    return _owner(inode) if inode else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slots", type=int, default=gate.CONNECT_SLOTS, help="0: no gate (before the fix)")
    args = ap.parse_args()
    if args.slots:
        gate.CONNECT_SLOTS = args.slots
    else:  # no gate at all, as before the fix
        from contextlib import nullcontext

        import harness.transport.adb.transport as adb_transport

        adb_transport.connect_slot = lambda *a, **k: nullcontext()  # type: ignore[assignment,attr-defined]  # the bench swaps the gate out
    work = Path(tempfile.mkdtemp(prefix="adb-burst-"))
    server = AdbServer().start()
    os.environ["HOME"] = str(server.home)  # a restart (the harness's) keeps its keys there
    devices = []
    try:
        for _i in range(args.devices):
            devices.append(OfflineDevice())
        inv = work / "devices.yaml"
        inv.write_text(yaml.safe_dump({"devices": [
            {"name": f"burst{i}", "transport": "adb", "serial": d.serial, "adb_server": f"127.0.0.1:{server.port}",
             "soc": "SM8750", "work_dir": "/data/local/tmp/h"} for i, d in enumerate(devices)]}))
        inventory = load_inventory(inv)
        specs = [inventory.get(f"burst{i}") for i in range(args.devices)]
        pid0 = _server_pid(server.port)
        print(f"adb server pid {pid0} on port {server.port}; {args.devices} offline TCP devices; "
              f"slots {args.slots or 'none'}", flush=True)
        deaths, pids = 0, {pid0}
        for r in range(args.rounds):
            answers: list[str] = []
            lock = threading.Lock()

            def one(spec, answers=answers, lock=lock) -> None:
                t = AdbTransport(spec, retry=RetryPolicy(attempts=1), connect_wait_s=0.5)
                t._server_seen = True  # noqa: SLF001 (the night's transports have answered before)
                try:
                    t._ensure_ready()  # noqa: SLF001
                    what = "ready"
                except TransportError as exc:
                    what = type(exc).__name__ + (": server gone" if "does not answer" in str(exc)
                                                 or "refuses" in str(exc) else "")
                with lock:
                    answers.append(what)

            t0 = time.monotonic()
            threads = [threading.Thread(target=one, args=(s,)) for s in specs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            pid = _server_pid(server.port)
            alive = subprocess.run(server.argv("devices"), env=server.env(), capture_output=True, text=True,
                                   timeout=30)
            restarted = "daemon not running" in alive.stderr or (pid is not None and pid != pid0)
            deaths += restarted
            gone = sum("server gone" in a for a in answers)
            print(f"round {r}: {time.monotonic() - t0:.1f} s, {len(answers)} answers ({gone} 'server gone'), "
                  f"server pid {pid} {'(NEW: the server died)' if restarted else '(same)'}", flush=True)
            pid0 = _server_pid(server.port)
            pids.add(pid0)
        log = Path(f"/tmp/adb.{os.getuid()}.log")  # every server of this user logs there
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        aborts = sum("fdevent_epoll.cpp:88" in ln and any(f" {p} " in ln for p in pids if p) for ln in lines)
        print(f"server deaths: {deaths} of {args.rounds} rounds; fdevent_epoll aborts in {log}: {aborts}")
        return 1 if deaths else 0
    finally:
        for d in devices:
            d.stop()
        server.started = True
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
