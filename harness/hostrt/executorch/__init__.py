"""ExecuTorch on the host, each program in its own process: runner.py is `qnn_llama_runner` on
ExecuTorch's `TextLLMRunner` (`python -m harness.hostrt.executorch`), forward.py one program's
`forward` through the pybindings (`pte_runner`), etdump.py an LLM run that writes an ETDump,
debug.py a debug program's forward with an ETDump and a debug buffer (localization).
This `__init__` is the package's one face. Names load on first use (PEP 562), so
`python -m harness.hostrt.executorch.forward` imports no sibling before it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "debug": ("DEBUG_MODULE",),
    "forward": ("RESULT_PREFIX", "SCRIPT_NAME", "parse_result"),
    "runner": ("CUSTOM_OPS_ENV", "EXIT_NO_ENGINE", "LLAMA_FLAGS", "RUNNER_NAME", "FlagError", "main",
               "make_runtime_dir", "parse_flags"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.hostrt.executorch.debug import DEBUG_MODULE as DEBUG_MODULE
    from harness.hostrt.executorch.forward import RESULT_PREFIX as RESULT_PREFIX
    from harness.hostrt.executorch.forward import SCRIPT_NAME as SCRIPT_NAME
    from harness.hostrt.executorch.forward import parse_result as parse_result
    from harness.hostrt.executorch.runner import CUSTOM_OPS_ENV as CUSTOM_OPS_ENV
    from harness.hostrt.executorch.runner import EXIT_NO_ENGINE as EXIT_NO_ENGINE
    from harness.hostrt.executorch.runner import LLAMA_FLAGS as LLAMA_FLAGS
    from harness.hostrt.executorch.runner import RUNNER_NAME as RUNNER_NAME
    from harness.hostrt.executorch.runner import FlagError as FlagError
    from harness.hostrt.executorch.runner import main as main
    from harness.hostrt.executorch.runner import make_runtime_dir as make_runtime_dir
    from harness.hostrt.executorch.runner import parse_flags as parse_flags
