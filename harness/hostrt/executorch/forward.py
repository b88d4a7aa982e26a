"""One ExecuTorch program's `forward` on the host through ExecuTorch's pybindings, in its own
process: with the host's QAIRT libraries on the loader path at process start, the QNN-delegated
parts run on QAIRT's x86 HTP emulator (docs/executorch-runner.md#the-htp-emulator).

    python -m harness.hostrt.executorch.forward --model_path M.pte --input X.npy [--input Y.npy]
        [--output OUT.npy] [--iterations N] [--etdump OUT.etdp] [--profile_level 2]
    python -m harness.hostrt.executorch.forward --model_path M.pte --tokens T.npy --output OUT.npy

`--profile_level N`: QNN's profiling at run time, as `qnn_executor_runner --profile_level` sets it
(backend_options.py): at 2 the ETDump holds QNN's per-op cycles for a program lowered without
profiling.

`--tokens`: a KV-cache program (forward(tokens [1,1], input_pos [1]) -> logits [1,1,V]) fed each
row of T.npy ([P, L] int64 token ids, -1 padding after a row's end) one id per step from position 0,
teacher-forced; OUT.npy holds its logits at every step ([P, L-1, V] float32: [p, t] is its
distribution for T[p, t + 1]; NaN where the row has ended), what docs/executorch-reference.md
compares with the float model's. Every row starts at position 0: the cache's later slots are masked.

Prints QNN's and ExecuTorch's own log as they come (stderr/stdout) and, last, one line
`RESULT {json}`: the registered backends, load and per-iteration times (s), the outputs'
shapes and dtypes, and the files written. Exit codes: 0 done, 1 the program failed to load or
run (`RuntimeError: ...` on stderr), 2 the `executorch` extra is not installed, 3 bad input.

ExecuTorch (with torch's CPU build) is the optional `executorch` extra, imported only here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

PROG = "python -m harness.hostrt.executorch.forward"
RESULT_PREFIX = "RESULT "
SCRIPT_NAME = "pte_runner"
EXIT_RUN_FAILED, EXIT_NO_ENGINE, EXIT_BAD_INPUT = 1, 2, 3


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG, description="Run a .pte's forward on the host (pybindings).")
    ap.add_argument("--model_path", required=True)
    ap.add_argument("--input", action="append", default=[], help=".npy file, one per program input, in order")
    ap.add_argument("--output", help="write the first output here (.npy)")
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--etdump", help="write the run's ETDump here (the program's profiling events)")
    ap.add_argument("--tokens", help=".npy of token ids: run the KV program teacher-forced over them")
    ap.add_argument("--profile_level", type=int, default=None,
                    help="QNN's profiling at run time (0 off, 1 basic, 2 per op), as qnn_executor_runner's")
    return ap.parse_args(argv)


def _run(args: argparse.Namespace) -> dict[str, object]:
    import numpy as np
    import torch
    from executorch.extension.pybindings import portable_lib

    if args.profile_level is not None:
        from harness.hostrt.executorch.backend_options import set_profile_level

        set_profile_level(args.profile_level)
    inputs = [torch.from_numpy(np.load(p)) for p in args.input]
    started = time.perf_counter()
    program = portable_lib._load_for_executorch(args.model_path, enable_etdump=bool(args.etdump))
    load_s = time.perf_counter() - started
    if args.tokens:
        return _with_etdump(program, args.etdump, _teacher_forced(program, np.load(args.tokens), args.output, load_s))
    run_s: list[float] = []
    outputs: list[Any] = []
    for _ in range(max(1, args.iterations)):
        started = time.perf_counter()
        outputs = program.forward(inputs)
        run_s.append(time.perf_counter() - started)
    result: dict[str, object] = {
        "backends": list(portable_lib._get_registered_backend_names()), "load_s": round(load_s, 6),
        "run_s": [round(t, 6) for t in run_s],
        "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype).removeprefix("torch.")} for o in outputs],
    }
    if args.output and outputs:
        np.save(args.output, outputs[0].float().numpy())
        result["output"] = args.output
    return _with_etdump(program, args.etdump, result)


def _with_etdump(program: Any, etdump: str | None, result: dict[str, Any]) -> dict[str, Any]:
    if etdump:
        program.write_etdump_result_to_file(etdump)
        result["etdump"] = etdump
    return result


def _teacher_forced(program: Any, tokens: Any, output: str | None, load_s: float) -> dict[str, object]:
    import numpy as np
    import torch

    rows = tokens.reshape(1, -1) if tokens.ndim == 1 else tokens
    out: Any = None
    started, steps = time.perf_counter(), 0
    for p, row in enumerate(rows.tolist()):
        ids = [int(t) for t in row if t >= 0]
        for pos, tok in enumerate(ids[:-1]):
            logits = program.forward([torch.tensor([[tok]], dtype=torch.long), torch.tensor([pos], dtype=torch.long)])[0]
            last = logits.reshape(-1, logits.shape[-1])[-1].float().numpy()
            if out is None:
                out = np.full((rows.shape[0], rows.shape[1] - 1, last.shape[-1]), np.nan, dtype=np.float32)
            out[p, pos] = last
            steps += 1
    result: dict[str, object] = {"load_s": round(load_s, 6), "run_s": [round(time.perf_counter() - started, 6)],
                              "steps": steps}
    if output and out is not None:
        np.save(output, out)
        result["output"] = output
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    files = [args.model_path, *args.input, *([args.tokens] if args.tokens else [])]
    return answer(files, "pass the .pte and its .npy inputs", lambda: _run(args))


def answer(files: Sequence[str], what: str, run: Callable[[], dict[str, Any]]) -> int:
    """A runtime child's one answer (this module's and debug.py's): its files checked, the run,
    then the RESULT line or the error and the exit code its parent reads (EXIT_*)."""
    missing = [p for p in files if not Path(p).is_file()]
    if missing:
        sys.stderr.write(f"error: {', '.join(missing)}: no such file; {what}\n")
        return EXIT_BAD_INPUT
    try:
        result = run()
    except ImportError as exc:
        sys.stderr.write(f"[Error]: ExecuTorch's pybindings are not installed ({exc}); "
                         "pip install 'harness[executorch]'\n")
        return EXIT_NO_ENGINE
    except RuntimeError as exc:
        sys.stdout.flush()
        sys.stderr.write(f"RuntimeError: {exc}\n")
        return EXIT_RUN_FAILED
    sys.stdout.flush()
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


def parse_result(stdout: str) -> dict[str, Any] | None:
    """The `RESULT {json}` line a run printed last (None when it stopped before it)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            try:
                found = json.loads(line[len(RESULT_PREFIX):])
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None


if __name__ == "__main__":
    sys.exit(main())
