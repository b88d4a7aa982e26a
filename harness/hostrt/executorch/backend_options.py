"""QNN's run-time options in a host process, set as `qnn_executor_runner` sets them.

`qnn_executor_runner --profile_level N` (examples/qualcomm/executor_runner/qnn_executor_runner.cpp)
puts `qnn_runtime_profile_level` = N into a `BackendOptions` and calls
`executorch::runtime::set_option("QnnBackend", options.view())` before it loads the program; the
QNN backend prefers a run-time option to the one the program was lowered with
(backends/qualcomm/runtime/QnnBackendOptions.h). ExecuTorch's pybindings have no such call, but
their `libexecutorch.so` exports that function, so the host runner makes the same call through it
(docs/executorch-runner.md#per-op-cycles-at-run-time). Layout, from ExecuTorch 1.5.1's
runtime/backend/options.h: `BackendOption { char key[64]; std::variant<bool, int,
std::array<char, 256>> value; }` (the variant: 256 bytes of storage, then its index byte; int is
index 1), and a `Span<T>` is `{T* data; size_t length}`, passed in two registers on x86_64.

Imported only in the runtime child (harness.hostrt.executorch.forward), after ExecuTorch.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

QNN_BACKEND = "QnnBackend"
PROFILE_LEVEL_KEY = "qnn_runtime_profile_level"
PROFILE_LEVELS = (0, 1, 2)  # off, basic, detailed (per op): the runner's --profile_level
_SET_OPTION = "_ZN10executorch7runtime10set_optionEPKcNS0_4SpanINS0_13BackendOptionEEE"
_INT_INDEX = 1


class _BackendOption(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char * 64), ("value", ctypes.c_ubyte * 256), ("index", ctypes.c_ubyte)]


def _libexecutorch() -> ctypes.CDLL:
    import executorch

    for root in executorch.__path__:
        lib = Path(root) / "lib" / "libexecutorch.so"
        if lib.is_file():
            return ctypes.CDLL(str(lib))
    raise RuntimeError("ExecuTorch's libexecutorch.so is not in the installed executorch package; "
                       "reinstall it: pip install 'harness[executorch]'")


def set_profile_level(level: int) -> None:
    """QNN's profiling for every program loaded after this call in this process (0 off, 1 basic,
    2 per op), as `qnn_executor_runner --profile_level` sets it. RuntimeError when ExecuTorch refuses."""
    if level not in PROFILE_LEVELS:
        raise RuntimeError(f"--profile_level {level}: QNN's levels are 0 (off), 1 (basic) and 2 (per op)")
    option = _BackendOption()
    option.key = PROFILE_LEVEL_KEY.encode()
    ctypes.c_int.from_buffer(option.value).value = level
    option.index = _INT_INDEX
    fn = _libexecutorch()[_SET_OPTION]
    fn.restype = ctypes.c_uint32
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    error = fn(QNN_BACKEND.encode(), ctypes.addressof(option), 1)
    if error != 0:  # executorch::runtime::Error::Ok
        raise RuntimeError(f"Failed to set runtime options: {QNN_BACKEND} refused {PROFILE_LEVEL_KEY}={level} "
                           f"(error 0x{error:x}); is the QNN backend registered in this ExecuTorch build?")
