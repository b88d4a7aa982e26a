"""The virtual lab's device runtimes: `llm_demo` (MNN) and `qnn_llama_runner` /
`qnn_executor_runner` (ExecuTorch), plus builders for runtime folders and a fake QNN SDK."""

from virtual_lab.runtime.builder import make_qnn_sdk, make_runtime_dir

__all__ = ["make_qnn_sdk", "make_runtime_dir"]
