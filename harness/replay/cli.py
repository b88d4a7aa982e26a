"""`harness replay`: a bundle's cell run again; exit 0 reproduced, 1 not, 4 refused (docs/bisect.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeVar

from harness.inventory import Inventory

P = TypeVar("P", bound=argparse.ArgumentParser)  # the front door's own parser class


def add_parser(sub: argparse._SubParsersAction[P]) -> P:
    p = sub.add_parser("replay", help="run a failed cell's repro bundle again; say whether the failure reproduced")
    p.add_argument("bundle", help="the bundle's folder (<out>/bundles/<device>/<testcase>/) or its bundle.json")
    p.add_argument("--device", help="another device of the same SoC (default: the bundle's)")
    p.add_argument("--out", default="replay-out", help="folder for the replay's night")
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    return p


def run_from_cli(args: argparse.Namespace, inventory: Inventory) -> int:
    from harness.hostfiles import prepare_output_dir
    from harness.lab import ExitCode
    from harness.replay.rerun import replay

    out = prepare_output_dir(Path(args.out), "output folder (--out)")
    result = replay(Path(args.bundle), inventory, args.device, out)
    print(result.line())
    return int(ExitCode.OK if result.reproduced else ExitCode.TESTS_FAILED)
