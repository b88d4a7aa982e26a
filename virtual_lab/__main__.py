"""`python -m virtual_lab up [--root DIR] [--devices-yaml FILE]`: start a virtual lab, write the
devices.yaml that points at it, and keep it running until Ctrl-C."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
from pathlib import Path

from virtual_lab.lab import VirtualLab


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m virtual_lab")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the default virtual lab (2 adb devices, 1 ssh board)")
    up.add_argument("--root", default=None, help="folder for the lab's state (default: a temp folder)")
    up.add_argument("--devices-yaml", default=None, help="also copy the lab's devices.yaml here")
    args = parser.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with VirtualLab(Path(args.root) if args.root else None) as lab:
        if args.devices_yaml:
            shutil.copyfile(lab.devices_yaml, args.devices_yaml)
        print(f"virtual lab up; devices file: {args.devices_yaml or lab.devices_yaml}", flush=True)
        for d in lab.inventory.devices.values():
            print(f"  {d.describe()}", flush=True)
        print("Ctrl-C stops it.", flush=True)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
