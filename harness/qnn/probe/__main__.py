"""`python -m harness.qnn.probe`: measure the HTP arch table on the host QNN and write it.

    python -m harness.qnn.probe [--out FILE] [--jobs 2] [--arch v68 ...] [--format 16a4w ...]
                                [--op layer_norm ...] [--qnn-sdk DIR] [--timeout SECONDS] [--resume]

Lowers every single-op probe (harness/qnn/probe/probes.py) at every format for one SoC per arch
through ExecuTorch's QNN quantizer and `to_edge_transform_and_lower_to_qnn`, in child processes on
the host QAIRT libraries, and writes op x format x arch (built, or QNN's classified refusal) with
the QAIRT and ExecuTorch versions, atomically, to FILE (default: the table shipped in the package,
harness/qnn/arch_limits.json). Each finished SoC is also written to FILE.partial.json;
--resume takes the cells measured there (with the same QAIRT build) instead of measuring them again.
Exit 0 written, 1 a child failed before any probe or the table could not be written, 4 bad usage.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.hostfiles import write_atomic
from harness.qnn.arch_limits import DEFAULT_PATH, SCHEMA_VERSION, ArchCell, load_cells
from harness.qnn.host import check_executorch_pairing, find_host_qnn
from harness.qnn.probe.probes import DEFAULT_FORMATS, PROBE_FORMATS, PROBE_NAMES
from harness.qnn.probe.run import SOC_OF_ARCH, Batch, measure

_USAGE = 4  # harness/lab/exitcodes.py USAGE_ERROR


def _version(pkg: str) -> str | None:
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


def table_json(cells: Sequence[ArchCell], qairt_build: str, seconds: float) -> dict[str, object]:
    return {
        "version": SCHEMA_VERSION,
        "tool": "python -m harness.qnn.probe",
        "qairt": qairt_build[1:].rsplit(".", 1)[0], "qairt_build": qairt_build,
        "executorch": _version("executorch"), "torch": _version("torch"),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(seconds),
        "socs": {a: s for a, s in SOC_OF_ARCH.items() if any(c.arch == a for c in cells)},
        "ops": sorted({c.op for c in cells}, key=PROBE_NAMES.index),
        "formats": sorted({c.fmt for c in cells}, key=PROBE_FORMATS.index),
        "cells": [c.to_json() for c in sorted(cells, key=lambda c: (c.arch, PROBE_NAMES.index(c.op),
                                                                       PROBE_FORMATS.index(c.fmt)))],
    }


def _pick(given: list[str] | None, known: Sequence[str], what: str, default: Sequence[str] | None = None) -> list[str]:
    if not given:
        return list(default if default is not None else known)
    bad = [g for g in given if g not in known]
    if bad:
        raise HarnessError(f"unknown {what} {', '.join(bad)}; choose from {', '.join(known)}")
    return given


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.qnn.probe", description=__doc__.split("\n\n")[2])
    ap.add_argument("--out", type=Path, default=DEFAULT_PATH, help=f"the table to write (default {DEFAULT_PATH})")
    ap.add_argument("--jobs", type=int, default=2, help="children at once (1 or 2)")
    ap.add_argument("--arch", action="append", help="an HTP arch (repeatable; default all of "
                                                    f"{', '.join(SOC_OF_ARCH)})")
    ap.add_argument("--format", action="append", help=f"a format (repeatable; default {', '.join(DEFAULT_FORMATS)}; "
                                                      f"known: {', '.join(PROBE_FORMATS)})")
    ap.add_argument("--op", action="append", help="a probe (repeatable; default all)")
    ap.add_argument("--qnn-sdk", help="a QAIRT root with lib/x86_64-linux-clang/ (default $QNN_SDK_ROOT, "
                                      "else the onnxruntime-qnn wheel)")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per child (default 1200)")
    ap.add_argument("--resume", action="store_true", help="reuse the cells of FILE.partial.json")
    args = ap.parse_args(argv)
    try:
        arches = _pick(args.arch, list(SOC_OF_ARCH), "arch")
        formats = _pick(args.format, PROBE_FORMATS, "format", DEFAULT_FORMATS)
        ops = tuple(_pick(args.op, PROBE_NAMES, "probe"))
        qnn = find_host_qnn(args.qnn_sdk)
        check_executorch_pairing(qnn)  # a pairing known to fail at device creation stops here
        build = qnn.qairt_build
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _USAGE
    partial = args.out.with_name(args.out.stem + ".partial.json")
    try:
        done = _resumed(partial, build) if args.resume else []
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _USAGE
    have = {(c.soc, c.fmt) for c in done}
    batches = [Batch(SOC_OF_ARCH[a], todo, ops) for a in arches
               if (todo := tuple(f for f in formats if (SOC_OF_ARCH[a], f) not in have))]
    print(f"measuring {len(ops)} probes x {len(formats)} formats x {len(arches)} arches on QAIRT {build} "
          f"({len(batches)} children, one per SoC, {args.jobs} at once; {len(done)} cells resumed)", flush=True)
    start = time.time()
    lock = threading.Lock()
    cells_so_far = list(done)

    def progress(b: Batch, cells: list[ArchCell]) -> None:
        with lock:  # children finish on pool threads
            cells_so_far.extend(cells)
            write_atomic(partial, json.dumps(table_json(cells_so_far, build, time.time() - start), indent=1) + "\n")
        for fmt in b.fmts:
            print(f"{b.soc} {fmt}: " + ", ".join(f"{c.op} {'built' if c.built else c.failure}"
                                                 for c in cells if c.fmt == fmt), flush=True)

    try:
        cells = done + measure(batches, qnn, jobs=args.jobs, timeout=args.timeout, progress=progress)
        write_atomic(args.out, json.dumps(table_json(cells, build, time.time() - start), indent=1) + "\n")
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    partial.unlink(missing_ok=True)
    print(f"wrote {args.out} ({len(cells)} cells, {time.time() - start:.0f} s)")
    return 0


def _resumed(partial: Path, build: str) -> list[ArchCell]:
    if not partial.is_file():
        return []
    data = json.loads(partial.read_text(encoding="utf-8"))
    if data.get("qairt_build") != build:
        raise HarnessError(f"{partial} was measured with QAIRT {data.get('qairt_build')}, these libraries are {build}; "
                           "delete it or run without --resume")
    return load_cells(data, partial)


if __name__ == "__main__":
    sys.exit(main())
