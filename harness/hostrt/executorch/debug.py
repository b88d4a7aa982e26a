"""A debug program's forward with its intermediate outputs recorded: ExecuTorch's pybindings load the
program with an ETDump and a debug buffer (`_load_for_executorch(pte, enable_etdump=True,
debug_buffer_size=N)`), run it once on the exporter's representative inputs and write the ETDump and
the debug buffer (what the C++ `qnn_executor_runner --dump_intermediate_outputs` writes on a phone:
`etdump.etdp`, `debug_output.bin`). With the host's QAIRT libraries on the loader path the
QNN-delegated part runs on the x86 HTP emulator (docs/localize.md).

    python -m harness.hostrt.executorch.debug --model_path debug.pte --inputs debug_inputs.npz \
        --debug_buffer_size N --etdump_path etdump.etdp --debug_output_path debug_output.bin

Prints one line `RESULT {json}` last (load and run seconds, the files). Exit codes: 0 done, 1 the
program failed (`RuntimeError: ...`), 2 the `executorch` extra is not installed, 3 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.hostrt.executorch.forward import answer

DEBUG_MODULE = "harness.hostrt.executorch.debug"
PROG = f"python -m {DEBUG_MODULE}"
SCRIPT_NAME = "pte_debug_runner"


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model_path", required=True)
    ap.add_argument("--inputs", required=True, help=".npz of input_0, input_1, ... in the program's order")
    ap.add_argument("--debug_buffer_size", type=int, required=True, help="bytes (harness.checks.localize sizes it)")
    ap.add_argument("--etdump_path", required=True)
    ap.add_argument("--debug_output_path", required=True)
    return ap.parse_args(argv)


def _replace(write: Any, path: str) -> None:
    """Write through a temporary name in the same folder, then rename."""
    final = Path(path)
    tmp = final.with_name(f".{final.name}.tmp")
    write(str(tmp))
    os.replace(tmp, final)


def _run(args: argparse.Namespace) -> dict[str, object]:
    import numpy as np
    import torch
    from executorch.extension.pybindings import portable_lib

    with np.load(args.inputs) as npz:
        inputs = [torch.from_numpy(npz[f"input_{i}"]) for i in range(len(npz.files))]
    started = time.perf_counter()
    program = portable_lib._load_for_executorch(args.model_path, enable_etdump=True,
                                                debug_buffer_size=args.debug_buffer_size)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    program.forward(inputs)
    run_s = time.perf_counter() - started
    debug_tmp = Path(args.debug_output_path).with_name(f".{Path(args.debug_output_path).name}.tmp")
    _replace(lambda p: program.write_etdump_result_to_file(p, str(debug_tmp)), args.etdump_path)
    os.replace(debug_tmp, args.debug_output_path)
    return {"load_s": round(load_s, 6), "run_s": round(run_s, 6), "etdump": args.etdump_path,
            "debug_output": args.debug_output_path, "debug_buffer_size": args.debug_buffer_size}


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    return answer([args.model_path, args.inputs], "pass the debug .pte and its inputs .npz", lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
