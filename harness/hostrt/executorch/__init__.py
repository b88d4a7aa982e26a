"""ExecuTorch on the host, each program in its own process: runner.py is `qnn_llama_runner` on
ExecuTorch's `TextLLMRunner` (`python -m harness.hostrt.executorch`), forward.py one program's
`forward` through the pybindings (`pte_runner`), etdump.py an LLM run that writes an ETDump.
This `__init__` is the package's one face. Names load on first use (PEP 562), so
`python -m harness.hostrt.executorch.forward` imports no sibling before it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {
    "runner": ("CUSTOM_OPS_ENV", "EXIT_NO_ENGINE", "LLAMA_FLAGS", "RUNNER_NAME", "FlagError", "main",
               "make_runtime_dir", "parse_flags"),
    "forward": ("RESULT_PREFIX", "SCRIPT_NAME", "parse_result"),
})

if TYPE_CHECKING:
    from harness.hostrt.executorch.forward import RESULT_PREFIX, SCRIPT_NAME, parse_result
    from harness.hostrt.executorch.runner import (
        CUSTOM_OPS_ENV,
        EXIT_NO_ENGINE,
        LLAMA_FLAGS,
        RUNNER_NAME,
        FlagError,
        main,
        make_runtime_dir,
        parse_flags,
    )
