"""`python -m harness.qnn.probe.compat`: measure the binary x runtime QAIRT table and write it.

    python -m harness.qnn.probe.compat --runtime DIR [--runtime DIR ...] [--out FILE] [--markdown] FILE...

Each FILE (a context binary, or an ExecuTorch .pte whose QnnBackend delegates are tried one by
one) is read by the host's libQnnSystem.so (its socModel and the QAIRT build in its header), then
loaded by each runtime DIR's libQnnHtp.so (an unpacked onnxruntime-qnn wheel's onnxruntime_qnn/,
or a QAIRT SDK's lib/x86_64-linux-clang/) through QNN's own `contextCreateFromBinary`, one child
process per runtime (harness/qnn/trial_load.py). Every cell is checked against the rule of
harness/qnn/compat.py; the table goes to FILE (default: the one shipped, harness/qnn/compat.json),
written atomically, with the runtimes' QAIRT builds; `--markdown` prints it as docs/qnn-compat.md
shows it. Exit 0 written and every cell agrees, 1 a cell disagrees or a runtime would not answer,
4 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.hostfiles import write_atomic
from harness.qnn.compat import COMPAT_TABLE_PATH, CompatCell, CompatTable, loads_on
from harness.qnn.host import qairt_version_of, read_qairt_build
from harness.qnn.trial_load import TrialLoadError, trial

_USAGE = 4  # harness/lab/exitcodes.py USAGE_ERROR
_LIB_DIRS = ("", "onnxruntime_qnn", "lib/x86_64-linux-clang")


def runtime_lib(folder: Path) -> Path:
    for sub in _LIB_DIRS:
        lib = folder / sub / "libQnnHtp.so"
        if lib.is_file():
            return lib
    raise HarnessError(f"{folder}: no libQnnHtp.so (looked in {', '.join(s or '.' for s in _LIB_DIRS)}); pass an "
                       "unpacked onnxruntime-qnn wheel or a QAIRT SDK's x86 library folder")


def header_of(files: Sequence[Path]) -> dict[str, tuple[str, int | None, str]]:
    """binary name -> (producer, socModel, QAIRT build), as the host's libQnnSystem.so reads them."""
    from harness.qnn.compiled_io import open_reader
    from harness.qnn.pte import is_pte, qnn_delegates

    lib, why = open_reader(None)
    if lib is None:
        raise HarnessError(f"cannot read the binaries' headers: {why}")
    out: dict[str, tuple[str, int | None, str]] = {}
    for path in files:
        jobs = ([(f"{path}#{d.method}[{d.index}]", d.offset, d.size) for d in qnn_delegates(path)] if is_pte(path)
                else [(str(path), 0, None)])
        for name, offset, size in jobs:
            info = lib.read_file(path, name, offset, size)
            graphs = [g.name for g in info.graphs]
            producer = ("ExecuTorch" if is_pte(path) else "ONNX Runtime QNN EP"
                        if any(g.startswith("QNNExecutionProvider") for g in graphs) else "context binary")
            out[name] = (producer, info.soc_model, info.qairt_build or "")
    return out


def measure(runtimes: Sequence[Path], files: Sequence[Path]) -> CompatTable:
    heads = header_of(files)
    cells, builds = [], []
    for folder in runtimes:
        lib = runtime_lib(folder)
        build = read_qairt_build(lib)[0]
        builds.append(build)
        for name, (rc, _said) in trial(lib, files).items():
            producer, soc_model, made = heads.get(name, ("context binary", None, ""))
            # The file's name, not where it lay on the measuring machine.
            cells.append(CompatCell(Path(name).name, producer, soc_model, made, build, rc, loads_on(made, build)))
    provenance = (f"python -m harness.qnn.probe.compat on {os.uname().machine}, the HTP emulator of each runtime, "
                  f"{time.strftime('%Y-%m-%d', time.gmtime())}")
    return CompatTable(tuple(cells), tuple(builds), provenance)


def markdown(table: CompatTable) -> str:
    """built-with x runtime: how many binaries loaded of how many tried, per cell."""
    runs = sorted(set(table.runtimes), key=lambda b: qairt_version_of(b))
    made = sorted({c.built_with for c in table.cells}, key=lambda b: qairt_version_of(b))
    lines = ["| built with | " + " | ".join(f"runtime {qairt_version_of(r)}" for r in runs) + " |",
             "|---|" + "---|" * len(runs)]
    for m in made:
        row = []
        for r in runs:
            got = [c for c in table.cells if c.built_with == m and c.runtime == r]
            ok = sum(c.loaded for c in got)
            codes = sorted({c.rc for c in got if not c.loaded})
            row.append(f"{ok}/{len(got)} load" + (f", err {', '.join(map(str, codes))}" if codes else ""))
        lines.append(f"| {qairt_version_of(m)} | " + " | ".join(row) + " |")
    agree = sum(c.agrees for c in table.cells)
    socs = sorted({c.soc_model for c in table.cells if c.soc_model is not None})
    producers = sorted({c.producer for c in table.cells})
    lines.append(f"\nThe rule holds in {agree} of {len(table.cells)} cells ({len(table.cells) // max(len(runs), 1)} "
                 f"binaries from {', '.join(producers)}; socModel {', '.join(map(str, socs))}).")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.qnn.probe.compat", description=__doc__.split("\n")[0])
    parser.add_argument("--runtime", action="append", type=Path, required=True, help="a QAIRT x86 library folder")
    parser.add_argument("--out", type=Path, default=COMPAT_TABLE_PATH)
    parser.add_argument("--markdown", action="store_true", help="print the table as docs/qnn-compat.md shows it")
    parser.add_argument("files", nargs="+", type=Path)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else _USAGE
    try:
        table = measure(args.runtime, args.files)
        write_atomic(args.out, json.dumps(table.to_json(), indent=1) + "\n")
    except (HarnessError, TrialLoadError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(markdown(table) if args.markdown else f"{args.out}: {len(table.cells)} cells")
    bad = [c for c in table.cells if not c.agrees]
    for c in bad:
        print(f"error: {c.binary} (QAIRT {c.built_with}) on {c.runtime}: rc {c.rc}, the rule says "
              f"{'loads' if c.predicted else 'refused'}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
