"""Provisioning speed against the adb CLI, through the virtual lab (real adb server, emulated adbd).

Prints median ratios (one run, no arguments needed):
  first push of a 1 GiB export / `adb push` of the same folder             target <= 1.05
  unchanged re-provision / `adb push --sync` of the same folder            target <= 0.2
  unchanged re-provision at 1 GiB / at 256 MiB                             target <= 1.3

"First push" starts from an empty device work dir and a cold hash cache (the export was just
written), so it includes hashing. "Unchanged" is a second provision with the cache warm, as a
test session's fixture would run it; `adb push --sync` runs against a folder it pushed before.

    python benchmarks/provision.py [--size-mb 1024] [--small-mb 256] [--reps 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.provision import HashCache, NullProgress, provision_model  # noqa: E402
from harness.transport import open_transport  # noqa: E402
from virtual_lab.exports import make_qwen3_export  # noqa: E402
from virtual_lab.lab import LabDeviceConfig, VirtualLab  # noqa: E402

DEVICE = "oneplus13"
BENCH_DIR = "/data/local/tmp/bench"


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--small-mb", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each first push (unchanged: 3x more)")
    ap.add_argument("--keep", type=Path, default=None, help="work folder to keep (default: a temp folder)")
    args = ap.parse_args(argv)

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-provision-"))
    root.mkdir(parents=True, exist_ok=True)
    lab = VirtualLab(root / "lab", [LabDeviceConfig(DEVICE, disk_capacity_bytes=256 << 30)])
    lab.start()
    try:
        big, small = root / "qwen3-big", root / "qwen3-small"
        t = time.perf_counter()
        make_qwen3_export(big, size_mb=args.size_mb)
        make_qwen3_export(small, size_mb=args.small_mb)
        print(f"exports written in {time.perf_counter() - t:.1f}s: {big} ({args.size_mb} MiB), "
              f"{small} ({args.small_mb} MiB)")
        device = lab.inventory.get(DEVICE)
        server = lab.adb_server_for(DEVICE)
        serial = lab.adb_device(DEVICE).serial

        def adb(*a: str) -> None:
            subprocess.run(server.argv("-s", serial, *a), check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

        transport = open_transport(device)
        transport.shell(["true"])  # connect once, as a session would have

        def wipe() -> None:
            # Only what provisioning owns: the transport keeps its scratch folder there.
            mine = [f"{device.work_dir}/{d}" for d in ("blobs", "models", "runtimes", "manifests")]
            transport.shell(["rm", "-rf", *mine, BENCH_DIR], check=True)
            transport.shell(["mkdir", "-p", BENCH_DIR], check=True)

        # ---- first push vs adb push ----------------------------------------------------
        first, adb_push = [], []
        for _ in range(args.reps):
            wipe()
            adb_push.append(_timed(lambda: adb("push", str(big), f"{BENCH_DIR}/adb")))
            wipe()
            cache = HashCache()  # cold: the export was just written
            first.append(_timed(lambda: provision_model(transport, big, cache=cache, progress=NullProgress())))

        # ---- unchanged vs adb push --sync, and 1 GiB vs 256 MiB ------------------------
        warm = HashCache()
        provision_model(transport, big, cache=warm, progress=NullProgress())
        provision_model(transport, small, cache=warm, progress=NullProgress())
        adb("push", str(big), f"{BENCH_DIR}/sync")
        unchanged_big, unchanged_small, adb_sync = [], [], []
        sent = 0
        for _ in range(args.reps * 3):
            adb_sync.append(_timed(lambda: adb("push", "--sync", str(big), f"{BENCH_DIR}/sync")))
            t0 = time.perf_counter()
            res = provision_model(transport, big, cache=warm, progress=NullProgress())
            unchanged_big.append(time.perf_counter() - t0)
            sent += res.bytes_sent
            unchanged_small.append(_timed(lambda: provision_model(transport, small, cache=warm,
                                                                  progress=NullProgress())))
        transport.close()
        counters = lab.adb_device(DEVICE).counters.snapshot()

        med = statistics.median
        rows = [
            ("first push 1 GiB / adb push", med(first), med(adb_push), 1.05),
            ("unchanged re-provision / adb push --sync", med(unchanged_big), med(adb_sync), 0.2),
            (f"unchanged {args.size_mb} MiB / {args.small_mb} MiB", med(unchanged_big), med(unchanged_small), 1.3),
        ]
        print(f"\nmedians over {args.reps} (first push) and {args.reps * 3} (unchanged) runs; "
              f"bytes sent by unchanged re-provisions: {sent}; device send_files total {counters['send_files']}")
        print(f"{'ratio':<44} {'ours s':>8} {'base s':>8} {'ratio':>7} {'target':>7}  ok")
        ok_all = True
        for label, ours, base, target in rows:
            ratio = ours / base
            ok = ratio <= target
            ok_all &= ok
            print(f"{label:<44} {ours:8.3f} {base:8.3f} {ratio:7.3f} {target:7.2f}  {'yes' if ok else 'NO'}")
        return 0 if ok_all and sent == 0 else 1
    finally:
        lab.stop()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
