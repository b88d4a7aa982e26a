"""`qnn_executor_runner` on the host: its gflags, its working-folder contract and its files, on
ExecuTorch's real runtime (the pybindings of the PyPI `executorch` wheel). With the host's QAIRT
libraries on the loader path at process start, the QNN-delegated part runs on QAIRT's x86 HTP
emulator (docs/executorch-runner.md#qnn_executor_runner-on-the-host).

    python -m harness.hostrt.executorch.executor --model_path debug.pte --input_list_path input_list.txt \
        --output_folder_path outputs --etdump_path etdump.etdp [--dump_intermediate_outputs \
        --debug_output_path debug_output.bin --debug_buffer_size N] [--method_index N] [--iteration N]

What the C++ runner does (ExecuTorch's examples/qualcomm/executor_runner/qnn_executor_runner.cpp),
done here with the same flags and defaults: the method at `--method_index` of the program's plan,
each line of the input list one inference (its space-separated raw files read as the method's input
tensors, sized from the method's meta), `--iteration` executions per line, every output written raw
to `<output_folder_path>/output_<line>_<index>.raw`, the mean time to `--performance_output_path`,
then the ETDump and (with `--dump_intermediate_outputs`) the whole debug buffer of
`--debug_buffer_size` bytes. A buffer too small is ExecuTorch's own abort ("Ran out of space to
store intermediate outputs."). `--profile_level` is set as the runner sets it, QnnBackend's run-time
option through ExecuTorch's `set_option`, before the program loads
(harness.hostrt.executorch.backend_options).
Log lines are the runner's (`[qnn_executor_runner.cpp:N] message`, line numbers of that file).
Exit codes: 0 done; 1 a flag error or a failed step (`RuntimeError: ...` last on stderr, as an
ET_CHECK_MSG's message before its abort); 2 the `executorch` extra is not installed.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.hostrt.executorch.runner import EXIT_NO_ENGINE, FlagError, parse_flags

MODULE = "harness.hostrt.executorch.executor"
RUNNER_NAME = "qnn_executor_runner"
DEFAULT_DEBUG_BUFFER_SIZE = 100_000_000  # the runner's --debug_buffer_size default (100 MB)

# qnn_executor_runner's gflags and defaults (docs/executorch-runner.md#qnn_executor_runner-flags).
EXECUTOR_FLAGS: dict[str, Any] = {
    "model_path": "model.pte", "output_folder_path": "outputs", "input_list_path": "input_list.txt",
    "iteration": 1, "warm_up": 0, "shared_buffer": False, "method_index": 0, "etdump_path": "etdump.etdp",
    "dump_intermediate_outputs": False, "debug_output_path": "debug_output.bin", "input_shape_path": "",
    "output_shape_path": "", "debug_buffer_size": DEFAULT_DEBUG_BUFFER_SIZE,
    "performance_output_path": "inference_speed.txt", "log_level": 0, "htp_performance_mode": 0,
    "lpai_fps": 0, "lpai_ftrt_ratio": 0, "lpai_client_perf_type": 0, "lpai_affinity": 0,
    "lpai_core_selection": 0, "profile_level": 0, "heap_profiling_path": "",
}


class RunFailed(RuntimeError):
    """An ET_CHECK_MSG of the real runner: its message, then the process ends."""


def log(line: int, msg: str) -> None:
    sys.stderr.write(f"[qnn_executor_runner.cpp:{line}] {msg}\n")
    sys.stderr.flush()


def _replace(write: Any, final: Path) -> None:
    tmp = final.with_name(f".{final.name}.tmp")
    write(str(tmp))
    os.replace(tmp, final)


def _inputs(flags: Mapping[str, Any], meta: Any) -> list[list[Any]]:
    """One list of input tensors per line of the input list (the runner's own parsing: split on
    single spaces, a trailing \\r dropped, the file's size must be the tensor's)."""
    import torch

    path = Path(flags["input_list_path"])
    if not path.is_file():
        return []
    rows: list[list[Any]] = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        files = raw.rstrip("\r").split(" ")
        if files == [""]:
            break
        if len(files) != meta.num_inputs():
            raise RunFailed(f"Number of inputs ({meta.num_inputs()}) mismatch with input files ({len(files)})")
        row = []
        for i, name in enumerate(files):
            info = meta.input_tensor_meta(i)
            data = Path(name).read_bytes() if Path(name).is_file() else b""
            if len(data) != info.nbytes():
                raise RunFailed(f"Input({i}) size mismatch. file bytes: {len(data)}, tensor bytes: {info.nbytes()}")
            dtype = _DTYPES.get(int(info.dtype()))
            if dtype is None:
                raise RunFailed(f"Input({i}): scalar type {info.dtype()} is not read by this runner")
            row.append(torch.frombuffer(bytearray(data), dtype=dtype).reshape(tuple(info.sizes())))
        rows.append(row)
    return rows


def _dtypes() -> dict[int, Any]:
    import torch

    # ExecuTorch's ScalarType numbering (runtime/core/portable_type/scalar_type.h), as c10's.
    return {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
            6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16, 27: torch.uint16}


_DTYPES: dict[int, Any] = {}


def run(flags: Mapping[str, Any]) -> int:
    from executorch.extension.pybindings import portable_lib

    _DTYPES.update(_dtypes())
    model = str(flags["model_path"])
    if flags["profile_level"]:
        log(246, f"Setting runtime profile level: {flags['profile_level']}")
        from harness.hostrt.executorch.backend_options import set_profile_level

        set_profile_level(int(flags["profile_level"]))
    debug = bool(flags["dump_intermediate_outputs"])
    size = int(flags["debug_buffer_size"]) if debug else 0
    if debug and size <= 0:
        raise RunFailed(f"--debug_buffer_size {size}: the debug buffer needs a positive size")
    if not Path(model).is_file():
        log(332, f"Failed to parse model file {flags['model_path']}")
        return 1
    program = portable_lib._load_program(model, enable_etdump=True, debug_buffer_size=size)
    log(335, f"Model file {flags['model_path']} is loaded.")
    if not 0 <= flags["method_index"] < program.num_methods():
        raise RunFailed(f"Program has no method {flags['method_index']} (it has {program.num_methods()})")
    name = program.get_method_name(flags["method_index"])
    log(345, f"Using method {name}")
    method = program.load_method(name)
    log(416, "Method loaded.")
    meta = method.method_meta()
    rows = _inputs(flags, meta)
    out_dir = Path(flags["output_folder_path"])
    elapsed_ms = 0.0
    for index, row in enumerate(rows):
        for _ in range(max(0, flags["warm_up"])):
            method.call(row)
        log(604, f"Start inference ({index})")
        started = time.perf_counter()
        outputs: Sequence[Any] = ()
        for _ in range(max(1, flags["iteration"])):
            outputs = method.call(row)
        took = (time.perf_counter() - started) * 1000
        elapsed_ms += took
        log(617, f"{flags['iteration']} inference took {took:f} ms, avg {took / max(1, flags['iteration']):f} ms")
        for k, out in enumerate(outputs):
            (out_dir / f"output_{index}_{k}.raw").write_bytes(out.contiguous().numpy().tobytes())
    if rows:
        log(661, f"Total {len(rows)} inference took {elapsed_ms:f} ms, avg {elapsed_ms / len(rows):f} ms")
        Path(flags["performance_output_path"]).write_text(f"{elapsed_ms / len(rows):g}", encoding="utf-8")
    else:
        method.call([])  # the runner's default inputs need a method without inputs here
        log(695, "Model executed successfully.")
    _write_dump(program, flags, debug)
    return 0


def _write_dump(program: Any, flags: Mapping[str, Any], debug: bool) -> None:
    etdump = Path(flags["etdump_path"])
    if not debug:
        _replace(lambda p: program.write_etdump_result_to_file(p), etdump)
        log(727, f"Write etdump to {etdump}")
        return
    out = Path(flags["debug_output_path"])
    tmp = out.with_name(f".{out.name}.tmp")
    _replace(lambda p: program.write_etdump_result_to_file(p, str(tmp)), etdump)
    log(727, f"Write etdump to {etdump}")
    os.replace(tmp, out)
    log(739, f"Write debug output binary to {out}, Size = {flags['debug_buffer_size']}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        flags = parse_flags(args, EXECUTOR_FLAGS)
    except FlagError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    try:
        return run(flags)
    except ImportError as exc:
        sys.stderr.write(f"[Error]: ExecuTorch's pybindings are not installed ({exc}); "
                         "pip install 'harness[executorch]'\n")
        return EXIT_NO_ENGINE
    except (RuntimeError, OSError) as exc:
        sys.stdout.flush()
        sys.stderr.write(f"RuntimeError: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
