"""Realistic MNN export folders (Qwen3-0.6B text, Qwen3-VL-2B with visual) for the virtual lab.

Used by tests, the demo, provisioning and the runners; file names and config keys follow what
MNN's `llmexport.py` and `npu/generate_llm_qnn.py` write (docs/mnn-export-layout.md). One job
per module:

    writer.py     make_qwen3_export / make_qwen3_vl_export: the folder, its layout and filler
    spec.py       ExportSpec (the knobs, checked) and the makeIOJson IO configs
    configs.py    the JSON files: runtime configs per backend pair, llm_config.json,
                  export_args.json, the sidecar qnn/export_manifest.json
    stub.py       the NPU stubs qnn/llm.mnn, qnn/visual.mnn (edit_stub, set_compiled_dims)
    context.py    the virtual qnn/graph*.bin headers and a stand-in qnn-context-binary-utility
    behaviour.py  virtual_behaviour.json: schema, faults, resolution per prompt and pair
    scenarios.py  what the knobs script on top of it (implied faults, scenario answers)
    segments.py   the virtual lab's token-count rule and the [POSDBG] lines it implies
    cli.py        python -m virtual_lab.exports {qwen3,qwen3-vl} DST [--size-mb N] ...

This package re-exports the public names of those modules, so `from virtual_lab.exports import
make_qwen3_export` (tests, benchmarks, tools) and `exports.resolve_answer` (the virtual runtime)
keep working; new code may import from the module that holds the name.
"""

from virtual_lab.exports.behaviour import (
    BEHAVIOUR_FILE,
    FAULTS,
    LOGITS_MODES,
    PAIR_CPU_CPU,
    PAIR_CPU_QNN,
    PAIR_QNN_CPU,
    PAIR_QNN_QNN,
    POSDBG_MODES,
    SCENARIOS,
    BehaviourAnswer,
    ResolvedAnswer,
    VirtualBehaviour,
    backend_pair_of,
    default_behaviour,
    load_behaviour,
    merge_behaviour,
    resolve_answer,
    validate_behaviour,
)
from virtual_lab.exports.binaries import edit_stub
from virtual_lab.exports.cli import main
from virtual_lab.exports.configs import (
    IMAGE_PAD,
    MANIFEST_FORMAT,
    MANIFEST_PATH,
    TEXT_CONFIGS,
    VIDEO_PAD,
    VISION_END,
    VISION_START,
    VL_CONFIGS,
)
from virtual_lab.exports.context import (
    CONTEXT_MAGIC,
    binary_target,
    context_binary_utility_json,
    read_context_header,
    write_sdk_tool,
)
from virtual_lab.exports.executorch import make_executorch_export
from virtual_lab.exports.scenarios import SATURATION_ANSWERS
from virtual_lab.exports.segments import (
    CHAT_PREFIX_TOKENS,
    CHAT_SUFFIX_TOKENS,
    posdbg_lines,
    virtual_prompt_segments,
)
from virtual_lab.exports.spec import DEEPSTACK_LAYERS, ExportSpec
from virtual_lab.exports.stub import set_compiled_dims
from virtual_lab.exports.writer import ExportInfo, make_qwen3_export, make_qwen3_vl_export

__all__ = [
    "BEHAVIOUR_FILE", "CHAT_PREFIX_TOKENS", "CHAT_SUFFIX_TOKENS", "CONTEXT_MAGIC", "DEEPSTACK_LAYERS", "binary_target",
    "FAULTS", "IMAGE_PAD", "LOGITS_MODES", "MANIFEST_FORMAT", "MANIFEST_PATH", "PAIR_CPU_CPU",
    "PAIR_CPU_QNN", "PAIR_QNN_CPU", "PAIR_QNN_QNN", "POSDBG_MODES", "SATURATION_ANSWERS", "SCENARIOS",
    "TEXT_CONFIGS", "VIDEO_PAD", "VISION_END", "VISION_START", "VL_CONFIGS", "BehaviourAnswer",
    "ExportInfo", "ExportSpec", "ResolvedAnswer", "VirtualBehaviour", "backend_pair_of",
    "context_binary_utility_json", "default_behaviour", "edit_stub", "load_behaviour", "main",
    "make_executorch_export", "make_qwen3_export", "make_qwen3_vl_export", "merge_behaviour", "posdbg_lines",
    "read_context_header", "resolve_answer", "set_compiled_dims", "validate_behaviour",
    "virtual_prompt_segments", "write_sdk_tool",
]
