"""`python -m harness.qnn_probe`: measure the HTP arch table on the host QNN and write it.

    python -m harness.qnn_probe [--out FILE] [--jobs 2] [--arch v68 ...] [--format 16a4w ...]
                                [--op layer_norm ...] [--qnn-sdk DIR] [--timeout SECONDS]

Lowers every single-op probe (harness/qnn_probe/probes.py) at every format for one SoC per arch
through ExecuTorch's QNN quantizer and `to_edge_transform_and_lower_to_qnn`, in child processes on
the host QAIRT libraries, and writes op x format x arch (built, or QNN's classified refusal) with
the QAIRT and ExecuTorch versions, atomically, to FILE (default: the table shipped in the package,
harness/runners/arch_limits.json). Exit 0 written, 1 a child failed before any probe, 4 bad usage.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.hostfiles import write_atomic
from harness.qnn_probe.env import find_probe_qnn
from harness.qnn_probe.probes import PROBE_FORMATS, PROBE_NAMES
from harness.qnn_probe.run import SOC_OF_ARCH, Batch, measure
from harness.runners.arch_limits import DEFAULT_PATH, SCHEMA_VERSION, ArchCell

_USAGE = 4  # harness/lab/exitcodes.py USAGE_ERROR


def _version(pkg: str) -> str | None:
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


def table_json(cells: Sequence[ArchCell], qairt_build: str, seconds: float) -> dict[str, object]:
    return {
        "version": SCHEMA_VERSION,
        "tool": "python -m harness.qnn_probe",
        "qairt": qairt_build[1:].rsplit(".", 1)[0], "qairt_build": qairt_build,
        "executorch": _version("executorch"), "torch": _version("torch"),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(seconds),
        "socs": {a: s for a, s in SOC_OF_ARCH.items() if any(c.arch == a for c in cells)},
        "ops": sorted({c.op for c in cells}, key=PROBE_NAMES.index),
        "formats": sorted({c.fmt for c in cells}, key=PROBE_FORMATS.index),
        "cells": [c.to_json() for c in sorted(cells, key=lambda c: (c.arch, PROBE_NAMES.index(c.op),
                                                                       PROBE_FORMATS.index(c.fmt)))],
    }


def _pick(given: list[str] | None, known: Sequence[str], what: str) -> list[str]:
    if not given:
        return list(known)
    bad = [g for g in given if g not in known]
    if bad:
        raise HarnessError(f"unknown {what} {', '.join(bad)}; choose from {', '.join(known)}")
    return given


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.qnn_probe", description=__doc__.split("\n\n")[2])
    ap.add_argument("--out", type=Path, default=DEFAULT_PATH, help=f"the table to write (default {DEFAULT_PATH})")
    ap.add_argument("--jobs", type=int, default=2, help="children at once (1 or 2)")
    ap.add_argument("--arch", action="append", help="an HTP arch (repeatable; default all of "
                                                    f"{', '.join(SOC_OF_ARCH)})")
    ap.add_argument("--format", action="append", help="a format (repeatable; default all)")
    ap.add_argument("--op", action="append", help="a probe (repeatable; default all)")
    ap.add_argument("--qnn-sdk", help="a QAIRT root with lib/x86_64-linux-clang/ (default $QNN_SDK_ROOT, "
                                      "else the onnxruntime-qnn wheel)")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per child (default 1200)")
    args = ap.parse_args(argv)
    try:
        arches = _pick(args.arch, list(SOC_OF_ARCH), "arch")
        formats = _pick(args.format, PROBE_FORMATS, "format")
        ops = tuple(_pick(args.op, PROBE_NAMES, "probe"))
        qnn = find_probe_qnn(args.qnn_sdk)
        build = qnn.qairt_build()
        if build is None:
            raise HarnessError(f"{qnn.lib_dir}/libQnnHtp.so carries no QAIRT build string; is it a QAIRT library?")
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _USAGE
    batches = [Batch(SOC_OF_ARCH[a], f, ops) for a in arches for f in formats]
    print(f"measuring {len(ops)} probes x {len(formats)} formats x {len(arches)} arches "
          f"on QAIRT {build} ({len(batches)} children, {args.jobs} at once)", flush=True)
    start = time.time()

    def progress(b: Batch, cells: list[ArchCell]) -> None:
        print(f"{b.soc} {b.fmt}: " + ", ".join(f"{c.op} {'built' if c.built else c.failure}" for c in cells),
              flush=True)

    try:
        cells = measure(batches, qnn, jobs=args.jobs, timeout=args.timeout, progress=progress)
        write_atomic(args.out, json.dumps(table_json(cells, build, time.time() - start), indent=1) + "\n")
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out} ({len(cells)} cells, {time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
