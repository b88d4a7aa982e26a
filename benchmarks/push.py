"""Push throughput: harness AdbTransport vs the `adb push` CLI, same server, same device.

    python benchmarks/push.py [--size-mb 1024 --files 30 --runs 3]

Starts an emulated device (virtual_lab) in a child process and a private real adb server
on free loopback ports, writes SIZE MiB of random data in FILES files, then per run pushes
the folder once through the harness (`push_tree`) and once with
`adb -P PORT -s SERIAL push DIR DEST`, alternating which goes first and flushing dirty pages
before each, after one untimed warm-up of each. Prints each run and the median harness/adb
time ratio; exits 1 when it is above --target.

Why a child process for the device: the emulated adbd is Python; in our own process it would
share the GIL with the harness's sender loop but not with the adb CLI, skewing the ratio.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout

import yaml  # noqa: E402

from harness.inventory import load_inventory  # noqa: E402
from harness.transport import AdbTransport  # noqa: E402

MiB = 1024 * 1024
REMOTE_BASE = "/data/local/tmp/bench"


def make_files(folder: Path, size_mb: int, files: int) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    total = size_mb * MiB
    per_file = total // files
    block = os.urandom(MiB)
    written = 0
    for i in range(files):
        size = per_file if i < files - 1 else total - per_file * (files - 1)
        with open(folder / f"part-{i:03d}.bin", "wb") as fh:
            left = size
            while left > 0:
                # A fresh random prefix per MiB keeps blocks distinct without urandom's cost.
                n = min(left, MiB)
                fh.write(os.urandom(16) + block[16:n] if n > 16 else os.urandom(n))
                left -= n
        written += size
    return written


def check_space(where: Path, need: int) -> None:
    free = shutil.disk_usage(where).free
    if free < need:
        raise SystemExit(f"push benchmark: {where} has {free / MiB:.0f} MiB free but needs about {need / MiB:.0f} MiB "
                         "(source files + two device copies); pass a smaller --size-mb or set TMPDIR to a bigger disk")


def device_bytes(transport: AdbTransport, src: Path, remote_dir: str) -> int:
    total = 0
    for p in sorted(src.rglob("*")):
        if p.is_file():
            st = transport.stat(f"{remote_dir}/{p.relative_to(src).as_posix()}")
            total += st.size if st is not None else 0
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def serve_device(root: Path, capacity: int) -> int:
    """Child-process mode: run the emulated device, print its port, stop when stdin closes."""
    from virtual_lab.device import VirtualDevice, VirtualDeviceSpec

    with VirtualDevice(VirtualDeviceSpec(name="bench", disk_capacity_bytes=capacity), root) as device:
        print(device.port, flush=True)
        sys.stdin.read()
    return 0


class DeviceProcess:
    def __init__(self, root: Path, capacity: int):
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve-device", str(root), "--capacity", str(capacity)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip() if self.proc.stdout else ""
        if not line.isdigit():
            self.stop()
            raise SystemExit(f"push benchmark: the emulated device did not start (printed {line!r})")
        self.serial = f"127.0.0.1:{line}"

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()  # the child's stdin.read() returns and it stops the device
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure(args: argparse.Namespace, src: Path, total: int, tmp: Path, serial: str, server) -> list[float]:
    server.attach(serial)
    inv = tmp / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{
        "name": "bench", "transport": "adb", "serial": serial,
        "adb_server": f"127.0.0.1:{server.port}", "soc": "SM8750"}]}))
    transport = AdbTransport(load_inventory(inv).get("bench"))
    transport.shell(["true"], check=True)  # connect + features before timing
    cpu_s: dict[str, float] = {}  # client-side CPU seconds of the last push of each kind

    def run_harness(dest: str) -> float:
        start, cpu = time.monotonic(), time.process_time()
        sent = transport.push_tree(src, dest)
        elapsed = time.monotonic() - start
        cpu_s["harness"] = time.process_time() - cpu
        if sent != total:
            raise SystemExit(f"harness pushed {sent} of {total} bytes")
        return elapsed

    def run_cli(dest: str) -> float:
        start, cpu = time.monotonic(), _children_cpu()
        res = subprocess.run(server.argv("-s", serial, "push", str(src), dest), env=server.env(),
                             capture_output=True, text=True, timeout=3600)
        elapsed = time.monotonic() - start
        cpu_s["adb"] = _children_cpu() - cpu
        if res.returncode != 0:
            raise SystemExit(f"adb push failed ({res.returncode}): {(res.stderr or res.stdout).strip()}")
        return elapsed

    def one(label: str, fn) -> float:
        dest = f"{REMOTE_BASE}/{label}"
        transport.remove(REMOTE_BASE, recursive=True)
        transport.makedirs(REMOTE_BASE)
        os.sync()  # earlier runs' dirty pages must not be written back during this one
        elapsed = fn(dest)
        got = device_bytes(transport, src, dest)
        if got != total:
            raise SystemExit(f"{label}: device holds {got} bytes after the push, expected {total}")
        return elapsed

    for label, fn in (("harness", run_harness), ("adb", run_cli)):
        one(label, fn)  # warm-up: page cache of the source, server and device threads
    ratios = []
    for run in range(args.runs):
        times: dict[str, float] = {}
        order = [("harness", run_harness), ("adb", run_cli)]
        if run % 2:
            order.reverse()
        for label, fn in order:
            times[label] = one(label, fn)
        ratio = times["harness"] / times["adb"]
        ratios.append(ratio)
        print(f"run {run + 1}: harness {times['harness']:.2f}s ({total / MiB / times['harness']:.0f} MiB/s), "
              f"adb push {times['adb']:.2f}s ({total / MiB / times['adb']:.0f} MiB/s), ratio {ratio:.3f}; "
              f"client CPU harness {cpu_s['harness']:.2f}s, adb {cpu_s['adb']:.2f}s")
    transport.remove(REMOTE_BASE, recursive=True)
    transport.close()
    return ratios


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="total MiB to push per run (default 1024)")
    ap.add_argument("--files", type=int, default=30, help="number of files (default 30)")
    ap.add_argument("--runs", type=int, default=3, help="runs; the median ratio is reported (default 3)")
    ap.add_argument("--target", type=float, default=1.05, help="maximum harness/adb time ratio (default 1.05)")
    ap.add_argument("--serve-device", type=Path, help=argparse.SUPPRESS)  # internal: child process mode
    ap.add_argument("--capacity", type=int, default=64 << 30, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_device:
        return serve_device(args.serve_device, args.capacity)
    if args.size_mb <= 0 or args.files <= 0 or args.runs <= 0 or args.size_mb * MiB < args.files:
        ap.error("--size-mb, --files and --runs must be positive, with at least one byte per file")

    from virtual_lab.adb_server import AdbServer

    with tempfile.TemporaryDirectory(prefix="bench-push-") as tmp_name:
        tmp = Path(tmp_name)
        check_space(tmp, 3 * args.size_mb * MiB + 64 * MiB)
        src = tmp / "src"
        t0 = time.monotonic()
        total = make_files(src, args.size_mb, args.files)
        print(f"source: {args.files} files, {total / MiB:.0f} MiB in {time.monotonic() - t0:.1f}s")

        device = DeviceProcess(tmp / "device", max(64 << 30, 4 * total))
        try:
            with AdbServer() as server:
                ratios = measure(args, src, total, tmp, device.serial, server)
        finally:
            device.stop()

    median = statistics.median(ratios)
    verdict = "OK" if median <= args.target else "ABOVE TARGET"
    print(f"median harness/adb time ratio over {args.runs} runs: {median:.3f} (target <= {args.target}) {verdict}")
    return 0 if median <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
