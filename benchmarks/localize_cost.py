"""The cost of localization against the cell's plain run, on the host's HTP emulator.

    python benchmarks/localize_cost.py EXPORT_DIR [--plain PTE] [--repeats 3]

EXPORT_DIR holds the exporter's debug build (`lower_decoder.py ... --debug-program`); PLAIN is the
cell's program (default: EXPORT_DIR/debug.pte, the same graph without the dumps' effect on the run).
Plain: `python -m harness.hostrt.executorch.forward` on the program's inputs, a whole process.
Localization: `run_debug_program` (a whole process: load, one forward with an ETDump and a debug
buffer sized from the program) + `localize` (ExecuTorch's Inspector, QNN's SQNR comparator, the
judgement), in this process. Medians of `--repeats`; target: localization <= 3x the plain run
(issue 33). Emulator timings are not device speed. Needs the qnn extra.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.checks.localize import INPUTS, DebugFiles, debug_buffer_size, localize  # noqa: E402
from harness.qnn import find_host_qnn  # noqa: E402
from harness.runners.executorch import run_debug_program  # noqa: E402


def _npy_inputs(npz: Path, folder: Path) -> list[str]:
    import numpy as np

    paths = []
    with np.load(npz) as data:
        for name in sorted(data.files):
            path = folder / f"{name}.npy"
            buf = io.BytesIO()
            np.save(buf, data[name])
            path.write_bytes(buf.getvalue())
            paths.append(str(path))
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export", type=Path)
    ap.add_argument("--plain", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    export = DebugFiles(args.export)
    export.require_build()
    env = find_host_qnn().child_env(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    plain, local, compare_s = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        inputs = _npy_inputs(export.path(INPUTS), Path(tmp))
        argv = [sys.executable, "-m", "harness.hostrt.executorch.forward", "--model_path",
                str(args.plain or export.path("debug.pte"))] + [a for p in inputs for a in ("--input", p)]
        for i in range(args.repeats):
            started = time.perf_counter()
            subprocess.run(argv, env=env, capture_output=True, check=True)
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            work = run_debug_program(export, Path(tmp) / f"run{i}", env)
            middle = time.perf_counter()
            result = localize(work)
            compare_s.append(time.perf_counter() - middle)
            local.append(time.perf_counter() - started)
    ratio = statistics.median(local) / statistics.median(plain)
    print(f"plain run {statistics.median(plain):.1f} s; localization {statistics.median(local):.1f} s "
          f"(comparison {statistics.median(compare_s):.1f} s); ratio {ratio:.2f} (target <= 3); "
          f"debug buffer {debug_buffer_size(export.encodings())} bytes; {result.summary()}")
    return 0 if ratio <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
