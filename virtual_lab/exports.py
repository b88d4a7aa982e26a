"""Realistic MNN export folders (Qwen3-0.6B text, Qwen3-VL-2B with visual) for the virtual lab.

Used by tests, the demo, provisioning and the runners. File names and config keys follow what
MNN's `llmexport.py` and `npu/generate_llm_qnn.py` write (docs/mnn-export-layout.md); file *contents* are
deterministic filler with plausible headers, sized by `size_mb` (a 1 GiB set writes in seconds).

Layout (Qwen3-VL; the text export has the same minus the visual files and the two mixed configs)::

    config.json                      CPU LLM / CPU visual   (exporter's runtime config + mllm block)
    config_qnn.json                  QNN LLM / QNN visual   (llm_model qnn/llm.mnn, chunk_limits [B,1])
    config_cpu_llm_qnn_visual.json   CPU LLM / QNN visual
    config_qnn_cpu_visual.json       QNN LLM / CPU visual
    llm_config.json  export_args.json  tokenizer.mtok|tokenizer.txt  embeddings_bf16.bin
    llm.mnn  llm.mnn.weight  visual.mnn  visual.mnn.weight
    qnn/llm.mnn  qnn/graphllm<N>.bin (one per NPU segment; layers+1 by default)
    qnn/visual.mnn  qnn/graphvisual<N>.bin
    qnn/export_manifest.json         the optional sidecar (knob sidecar=True), see below

qnn/llm.mnn and qnn/visual.mnn are real MNN models in compilefornpu's stub layout (one QNN
`Plugin` op per context binary with path / allGraphName / allInputShape / inputs / outputs /
o_<shape>_<k>, docs/qnn-export-artifacts.md), written with the `mnn` package's converter from
the same makeIOJson configs as the sidecar's `io`, so harness.compiled_io reads them as it reads
a real export. `edit_stub` / `set_compiled_dims` rewrite one in place (faulty stubs for tests).
    virtual_behaviour.json           virtual lab only, see below

Backend pairs are "<visual backend>/<llm backend>", as users name the matrix (QNN/CPU = visual on
QNN, LLM on CPU; harness/pairs.py decides them), each "qnn" or "cpu"; a config's pair is
`backend_pair_of(config)` (the virtual lab always names both sides: a model without a visual part
reports "cpu" for the visual side, so its QNN config is "cpu/qnn").

qnn/export_manifest.json (optional sidecar, knob sidecar=True)
-------------------------------------------------------------
Written here in the format docs/qnn-export-artifacts.md specifies (its one home; harness.export
reads it): soc_id/dsp_arch, chunk size, image sizes (WxH), the makeIOJson IO and the graphs.

Binary headers (virtual lab only): `qnn/graph*.bin` start with b"QNNCTX\\0\\1", a little-endian
u32 length and a JSON header {"graphs": [...], "soc_id", "dsp_arch", "vtcm_mb", "graph_io"},
then filler. `read_context_header(path)` returns that JSON, so the virtual runtime can fail with
`QNN: Failed to validate binary` when soc/arch do not match the device; `write_sdk_tool(dir)`
writes a stand-in `qnn-context-binary-utility` that dumps it in the SDK tool's JSON layout
(`context_binary_utility_json`).

virtual_behaviour.json (virtual lab only; `VirtualBehaviour` below)
-------------------------------------------------------------------
::

    {"default": {"text": "...", "prefill_ms_per_token": 2.0, "decode_ms_per_token": 25.0,
                 "fault": null, "posdbg": null},
     "prompts": {"<substring of prompt>": {"<pair e.g. qnn/qnn | qnn/cpu | cpu/qnn | cpu/cpu, or *>":
                     {"text": ..., "fault": ..., "posdbg": ...,
                      "prefill_ms_per_token": ..., "decode_ms_per_token": ...}}}}

Resolution (`resolve_answer`): start from "default"; then every prompt key that is a substring
of the prompt, shortest key first (so "" is a catch-all and longer keys are more specific),
each applying its "*" entry and then its exact-pair entry. Fields overlay one by one; an explicit
null overrides. Faults (what the virtual llm_demo should print, docs/llm-demo-output.md#exit-codes
and #error-strings):

- null: normal answer, then the performance summary.
- "crash" / "abort": die mid-generation with SIGSEGV (rc 139) / SIGABRT (rc 134).
- "hang": stop printing and never exit (the harness's timeout must kill it).
- "shape_error": QNN LLM: `MNN_QNN: Failed to compute shape for Plugin Op.`; CPU LLM:
  `Broad cast error, dim1 = 3, dim2 = 4` / `Compute Shape Error for <op>` / `code=3 in onForward,
  <line>` / `[Error]: onForward returned no outputs. ...`; then `Error: Response generation
  failed due to internal error` rc 255 (no max_token arg) or `[Error]: LLM in error state.
  Status: 4` rc 0 (max_token arg given).
- "poison_next": this prompt fails as above and every later prompt of the process prints only
  `[Error]: LLM in error state. Status: 4`.
- "init_error": `[Error]: LLM model file not found: <p>` then `LLM init error`, rc 0.
- "qnn_lib_missing": `MNN_QNN: Failed to open QNN libs. Ensure that the libs related to the QNN
  HTP backend is available in your environment. dlerror() returns <msg>.` then `LLM init error`.
- "binary_mismatch": `QNN: Failed to validate binary: <code>` then `LLM init error`.
"logits" (what the virtual `llm_logits_diff` prints when this pair is config B against a CPU
config A, teacher-forced; docs/logits-diff.md): null = "exact" for cpu/cpu and "close" for any
pair with a QNN part; "exact" (bit-identical rows), "close" (a healthy 16-bit export: small
logit differences, no argmax flip, mean KL ~0.015), "saturated" (the activation-saturation
fault: most steps flip, mean KL ~3, NLL gap ~2.5), "null" (B's forward returns nothing:
`forward returned null at step 0`, a summary with 0 disagreements and no distribution line).
"posdbg": null prints no position dumps; "ok" / "chunk_local_bug" / "past_end" print the
`[POSDBG]` lines of `virtual_lab.mrope_sim.posdbg_lines` for the prompt's segments
(`virtual_prompt_segments` gives the virtual lab's token-count rule; use it for both the
"prompt tokens num" line and the dumps so tests can rebuild the reference).

The generator pre-scripts the faults its knobs imply: a `[3,1,1]` deepstack placeholder or a
chunk_limits/chunk_size mismatch makes every prompt on a QNN LLM a "shape_error"; a visual graph
without `deepstack_feature` makes image prompts ("<img>") on a QNN visual a "shape_error".
Missing files, soc/arch mismatch and image sizes are left for the runtime to detect itself.

CLI: python -m virtual_lab.exports {qwen3,qwen3-vl} DST [--size-mb N] [--soc-id 69 --dsp-arch v79]
[--no-sidecar]
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypedDict

from harness.export import SIDECAR_FORMAT, SIDECAR_PATH
from harness.pairs import BackendPair

PAIR_QNN_QNN = "qnn/qnn"
PAIR_CPU_QNN = "qnn/cpu"  # LLM on CPU, visual on QNN (pairs are written visual/llm)
PAIR_QNN_CPU = "cpu/qnn"  # LLM on QNN, visual on CPU (or no visual part)
PAIR_CPU_CPU = "cpu/cpu"

# Which config the generator writes for each pair, keyed by the virtual lab's both-sides name.
VL_CONFIGS: dict[str, str] = {p.visual_llm: p.config_name for p in BackendPair.all(visual=True)}
TEXT_CONFIGS: dict[str, str] = {p.visual_llm: p.config_name for p in BackendPair.all(visual=False)}

LOGITS_MODES = ("exact", "close", "saturated", "null")
# Scenarios a generated export can carry (knob `scenario=`): scripted answers and logits.
SCENARIOS = ("healthy", "activation_saturation")
FAULTS = (
    "crash", "abort", "hang", "shape_error", "poison_next", "init_error", "qnn_lib_missing",
    "binary_mismatch",
)
POSDBG_MODES = ("ok", "chunk_local_bug", "past_end")
MANIFEST_PATH = SIDECAR_PATH
MANIFEST_FORMAT = SIDECAR_FORMAT
BEHAVIOUR_FILE = "virtual_behaviour.json"
CONTEXT_MAGIC = b"QNNCTX\x00\x01"
DEEPSTACK_LAYERS = 3  # Qwen3-VL deepstack_visual_indexes [5, 11, 17]

# Real Qwen2/3-VL special token ids (HF tokenizer_config)
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 151652, 151653, 151655, 151656

_QWEN_TEMPLATE = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
    "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)


# --------------------------------------------------------------------------------------------
# virtual_behaviour.json schema and resolution
# --------------------------------------------------------------------------------------------


class BehaviourAnswer(TypedDict, total=False):
    text: str
    fault: str | None  # one of FAULTS
    posdbg: str | None  # one of POSDBG_MODES
    logits: str | None  # one of LOGITS_MODES (virtual llm_logits_diff, as config B)
    prefill_ms_per_token: float
    decode_ms_per_token: float


class VirtualBehaviour(TypedDict):
    default: BehaviourAnswer  # must hold text, prefill_ms_per_token, decode_ms_per_token
    prompts: dict[str, dict[str, BehaviourAnswer]]  # prompt substring -> pair or "*" -> answer


@dataclass(frozen=True)
class ResolvedAnswer:
    text: str
    fault: str | None
    posdbg: str | None
    prefill_ms_per_token: float
    decode_ms_per_token: float
    logits: str | None = None

    def logits_mode(self, pair: str) -> str:
        """How this pair's logits differ from the CPU/CPU ones (the module docstring)."""
        if self.logits is not None:
            return self.logits
        return "exact" if pair in (PAIR_CPU_CPU, "cpu") else "close"


_ANSWER_KEYS = {"text", "fault", "posdbg", "logits", "prefill_ms_per_token", "decode_ms_per_token"}


def validate_behaviour(data: Any, source: str = BEHAVIOUR_FILE) -> VirtualBehaviour:
    """Check a behaviour document; raise ValueError naming the bad key."""
    if not isinstance(data, dict) or not isinstance(data.get("default"), dict):
        raise ValueError(f"{source}: needs a 'default' object")
    prompts = data.get("prompts", {})
    if not isinstance(prompts, dict):
        raise ValueError(f"{source}: 'prompts' must be an object of prompt substring -> pairs")
    for key in ("text", "prefill_ms_per_token", "decode_ms_per_token"):
        if key not in data["default"]:
            raise ValueError(f"{source}: default.{key} is missing")
    entries = [("default", data["default"])]
    for sub, pairs in prompts.items():
        if not isinstance(pairs, dict):
            raise ValueError(f"{source}: prompts[{sub!r}] must map backend pairs to answers")
        for pair, ans in pairs.items():
            if pair != "*" and not re.fullmatch(r"(qnn|cpu)/(qnn|cpu)", pair):
                raise ValueError(
                    f"{source}: prompts[{sub!r}] key {pair!r} is not a backend pair "
                    f"(qnn/qnn, qnn/cpu, cpu/qnn, cpu/cpu) or '*'"
                )
            entries.append((f"prompts[{sub!r}][{pair!r}]", ans))
    for where, ans in entries:
        if not isinstance(ans, dict):
            raise ValueError(f"{source}: {where} must be an object")
        unknown = set(ans) - _ANSWER_KEYS
        if unknown:
            raise ValueError(f"{source}: {where} has unknown keys {sorted(unknown)}")
        if ans.get("fault") is not None and ans["fault"] not in FAULTS:
            raise ValueError(f"{source}: {where}.fault {ans['fault']!r} is not one of {FAULTS}")
        if ans.get("posdbg") is not None and ans["posdbg"] not in POSDBG_MODES:
            raise ValueError(f"{source}: {where}.posdbg {ans['posdbg']!r} is not one of {POSDBG_MODES}")
        if ans.get("logits") is not None and ans["logits"] not in LOGITS_MODES:
            raise ValueError(f"{source}: {where}.logits {ans['logits']!r} is not one of {LOGITS_MODES}")
    return data  # type: ignore[return-value]


def load_behaviour(path: Path) -> VirtualBehaviour:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read behaviour file ({exc})") from None
    return validate_behaviour(data, str(path))


def resolve_answer(behaviour: VirtualBehaviour, prompt: str, pair: str) -> ResolvedAnswer:
    """The scripted answer for `prompt` on backend `pair` (rules in the module docstring)."""
    merged: dict[str, Any] = {"fault": None, "posdbg": None, "logits": None}
    merged.update(behaviour["default"])
    matches = [k for k in behaviour.get("prompts", {}) if k in prompt]
    for key in sorted(matches, key=len):  # stable: equal lengths keep file order
        pairs = behaviour["prompts"][key]
        for sel in ("*", pair):
            if sel in pairs:
                merged.update(pairs[sel])
    return ResolvedAnswer(
        text=str(merged["text"]),
        fault=merged.get("fault"),
        posdbg=merged.get("posdbg"),
        prefill_ms_per_token=float(merged["prefill_ms_per_token"]),
        decode_ms_per_token=float(merged["decode_ms_per_token"]),
        logits=merged.get("logits"),
    )


def backend_pair_of(config: Mapping[str, Any]) -> str:
    """'<visual>/<llm>' for a runtime config, from its content (harness.pairs decides)."""
    return BackendPair.of_config(config, visual=True).visual_llm


def default_behaviour(is_visual: bool) -> VirtualBehaviour:
    """Scripted answers a healthy export gives; CPU pairs are slower than QNN."""
    prompts: dict[str, dict[str, BehaviourAnswer]] = {
        "": {
            PAIR_CPU_CPU: {"prefill_ms_per_token": 12.0, "decode_ms_per_token": 60.0},
            PAIR_CPU_QNN: {"prefill_ms_per_token": 12.0, "decode_ms_per_token": 60.0},
        },
        "capital of France": {"*": {"text": "The capital of France is Paris."}},
        "2+2": {"*": {"text": "2 + 2 = 4."}},
        "Describe a cat": {
            "*": {"text": "A cat is a small, furry animal with soft fur, whiskers and a long tail. "
                          "It likes to sleep in warm places and chase small things."}
        },
    }
    if is_visual:
        prompts["<img>"] = {"*": {"text": "The image shows a red square on a white background."}}
    return {
        "default": {
            "text": "I am a small language model running on the device. How can I help you today?",
            "prefill_ms_per_token": 2.0,
            "decode_ms_per_token": 25.0,
            "fault": None,
            "posdbg": None,
        },
        "prompts": prompts,
    }


_WORD_RE = re.compile(r"\w+|[^\w\s]")
_IMG_RE = re.compile(r"<img>(.*?)</img>", re.S)
_HW_RE = re.compile(r"<hw>\s*(\d+)\s*,\s*(\d+)\s*</hw>")
CHAT_PREFIX_TOKENS = 3  # <|im_start|> user \n
CHAT_SUFFIX_TOKENS = 5  # <|im_end|> \n <|im_start|> assistant \n


def virtual_prompt_segments(prompt: str, llm_config: Mapping[str, Any]) -> list:
    """The virtual lab's token-count rule as mRoPE segments (harness.checks.mrope Text/Image):
    one token per word or punctuation mark, the chat template's 3 + 5 tokens around the user
    turn, and each `<img>` as an image block whose grid comes from `<hw>H, W</hw>` (height first)
    or else llm_config image_size x image_size."""
    from harness.checks.mrope import Text, image_llm_grid  # lazy: only the runtime needs it

    segments: list = []
    pending = CHAT_PREFIX_TOKENS
    pos = 0
    for m in _IMG_RE.finditer(prompt):
        pending += len(_WORD_RE.findall(prompt[pos:m.start()]))
        hw = _HW_RE.search(m.group(1))
        size = int(llm_config.get("image_size", 420))
        height, width = (int(hw.group(1)), int(hw.group(2))) if hw else (size, size)
        if llm_config.get("is_visual"):
            if pending:
                segments.append(Text(pending))
            pending = 0
            segments.append(image_llm_grid(height, width))
        pos = m.end()
    pending += len(_WORD_RE.findall(prompt[pos:])) + CHAT_SUFFIX_TOKENS
    segments.append(Text(pending))
    return segments


def posdbg_lines(prompt: str, llm_config: Mapping[str, Any], *, mode: str,
                 chunk_limits: Sequence[int] = (128, 1), decode_tokens: int = 0,
                 full: bool = True) -> list[str]:
    """`[POSDBG]` lines the virtual runtime prints for `prompt` (delegates to virtual_lab.mrope_sim)."""
    from harness.checks import mrope  # lazy: virtual_lab may use the harness's reference
    from virtual_lab import mrope_sim

    ref = mrope.reference_positions(virtual_prompt_segments(prompt, llm_config))
    return mrope_sim.posdbg_lines(ref, chunk_limits=chunk_limits, mode=mode,
                                  decode_tokens=decode_tokens, full=full)


# --------------------------------------------------------------------------------------------
# Export folders
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportInfo:
    path: Path
    model_type: str
    configs: dict[str, str]  # backend pair -> config file name
    soc_id: int
    dsp_arch: str
    chunk_size: int
    hidden: int
    files: tuple[str, ...]  # relative paths present after the knobs were applied
    image_sizes: tuple[tuple[int, int], ...] = ()  # (width, height) as in --image_sizes
    is_visual: bool = False
    total_bytes: int = 0
    missing: tuple[str, ...] = ()

    def config_path(self, pair: str) -> Path:
        try:
            return self.path / self.configs[pair]
        except KeyError:
            raise ValueError(f"{self.path}: no config for backend pair {pair!r}; "
                             f"have {sorted(self.configs)}") from None


@dataclass
class _Spec:
    """Everything that differs between the text and the VL export."""

    model_type: str
    hf_name: str
    hidden: int
    layers: int
    vocab: int
    is_visual: bool
    size_mb: float
    soc_id: int
    dsp_arch: str
    vtcm_mb: int
    chunk_size: int
    chunk_limits: list[int]
    image_sizes: tuple[tuple[int, int], ...]
    deepstack_placeholder: bool
    visual_outputs: tuple[str, ...]
    tokenizer: str
    n_llm_graphs: int
    n_visual_graphs: int
    sampler_type: str
    seed: int
    sidecar: bool = True
    scenario: str = "healthy"  # one of SCENARIOS
    extra: dict = field(default_factory=dict)


class _FillWriter:
    """Deterministic filler: one seeded 1 MiB block, rotated per file so files differ."""

    BLOCK = 1 << 20

    def __init__(self, seed: int) -> None:
        self._block = random.Random(seed).randbytes(self.BLOCK)
        self._twice = memoryview(self._block + self._block)

    def write(self, path: Path, size: int, header: bytes = b"") -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        offset = sum(path.name.encode()) * 4099 % self.BLOCK
        with open(path, "wb") as fh:
            fh.write(header[:size])
            left = size - min(len(header), size)
            while left > 0:
                n = min(left, self.BLOCK)
                fh.write(self._twice[offset:offset + n])
                left -= n
        return size


def _json(path: Path, data: Any) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=4, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return len(text.encode())


def _parse_sizes(sizes: Iterable[Any]) -> tuple[tuple[int, int], ...]:
    out = []
    for s in sizes:
        if isinstance(s, str):
            m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", s)
            if not m:
                raise ValueError(f"image size {s!r} must be 'WxH' (width first), e.g. '512x384'")
            out.append((int(m.group(1)), int(m.group(2))))
        else:
            w, h = s
            out.append((int(w), int(h)))
    if any(w <= 0 or h <= 0 for w, h in out):
        raise ValueError(f"image sizes must be positive, got {out}")
    return tuple(out)


def _llm_io(spec: _Spec) -> dict:
    """makeIOJson's format; VL models get [3,seq] positions and a real deepstack input."""
    mask_type = "float"
    configs = []
    for seq, logits_index in ((spec.chunk_size, 0), (1, -1)):
        inputs: list[dict] = [
            {"name": "input_ids", "shape": [seq, 1, spec.hidden]},
            {"name": "attention_mask", "shape": [1, 1, seq, seq], "type": mask_type},
            {"name": "position_ids", "shape": [3 if spec.is_visual else 1, seq], "type": "int"},
            {"name": "logits_index", "shape": [1], "type": "int", "value": logits_index},
        ]
        if spec.is_visual:
            shape = [3, 1, 1] if spec.deepstack_placeholder else [DEEPSTACK_LAYERS, seq, spec.hidden]
            inputs.append({"name": "deepstack_embeds", "shape": shape})
        configs.append({"inputs": inputs, "outputs": ["logits"]})
    return {"configs": configs}


def _visual_io(spec: _Spec) -> dict:
    """makeVLIOJson's Qwen3-VL branch (align 32, patch 16), one config per (w, h)."""
    configs = []
    for w, h in spec.image_sizes:
        grid_h = (round(h / 32) * 32) // 16
        grid_w = (round(w / 32) * 32) // 16
        seq = grid_h * grid_w
        configs.append({
            "inputs": [
                {"name": "patches", "shape": [seq, 1536]},
                {"name": "position_ids", "shape": [2, seq]},
                {"name": "attention_mask", "shape": [1, seq, seq]},
                {"name": "idx_tensor", "shape": [4, seq]},
                {"name": "weight_tensor", "shape": [4, seq]},
            ],
            "outputs": list(spec.visual_outputs),
        })
    return {"configs": configs}


# --------------------------------------------------------------------------------------------
# NPU stubs (qnn/llm.mnn, qnn/visual.mnn) in the real compilefornpu layout
# --------------------------------------------------------------------------------------------

_INT_INPUTS = {"position_ids", "logits_index", "idx_tensor"}


@dataclass(frozen=True)
class _PluginSpec:
    """One context binary as the stub's Plugin op describes it."""

    path: str  # "qnn/graphllm0.bin"
    graph_names: tuple[str, ...]  # one per compiled shape
    inputs: tuple[str, ...]  # tensor names
    outputs: tuple[str, ...]
    input_dims: tuple[tuple[tuple[int, ...], ...], ...]  # [shape][input] -> dims
    output_dims: tuple[tuple[tuple[int, ...], ...], ...]  # [shape][output] -> dims


def _declared(per_shape: Sequence[Sequence[int]]) -> list[int]:
    """An Input op's dims: fixed where every compiled shape agrees, -1 where they differ."""
    first = list(per_shape[0])
    return [d if all(len(s) == len(first) and s[k] == d for s in per_shape) else -1
            for k, d in enumerate(first)]


def _stub_graph(configs: Sequence[dict], plugins: Sequence[_PluginSpec], outputs: Sequence[str]) -> dict:
    """The MNN graph JSON (mnnconvert's dump format) of a compilefornpu stub: the top-level
    Input ops, then one Plugin op (type QNN) per context binary with the attributes the QNN
    plugin reads (docs/qnn-export-artifacts.md)."""
    names: list[str] = []
    index: dict[str, int] = {}

    def tensor(name: str) -> int:
        if name not in index:
            index[name] = len(names)
            names.append(name)
        return index[name]

    ops: list[dict] = []
    for inp in configs[0]["inputs"]:
        name = inp["name"]
        per_shape = [next(i["shape"] for i in c["inputs"] if i["name"] == name) for c in configs]
        main: dict[str, Any] = {"dims": _declared(per_shape), "dformat": "NCHW"}
        if name in _INT_INPUTS or inp.get("type") == "int":
            main["dtype"] = "DT_INT32"
        ops.append({"main_type": "Input", "main": main, "name": name,
                    "outputIndexes": [tensor(name)], "type": "Input"})
    for p in plugins:
        ins = [tensor(n) for n in p.inputs]
        outs = [tensor(n) for n in p.outputs]
        attrs: list[dict] = [
            {"key": "path", "s": p.path},
            {"key": "inputs", "list": {"s": [f"t{i}" for i in ins]}},
            {"key": "allGraphName", "list": {"s": list(p.graph_names)}},
            {"key": "outputs", "list": {"s": [f"t{i}" for i in outs]}},
            {"key": "allInputShape", "list": {"i": [d for shape in p.input_dims for dims in shape for d in dims]}},
        ]
        for si, shape in enumerate(p.output_dims):
            attrs += [{"key": f"o_{si}_{k}", "tensor": {"dims": list(dims)}} for k, dims in enumerate(shape)]
        ops.append({"inputIndexes": ins, "main_type": "Plugin", "main": {"type": "QNN", "attr": attrs},
                    "name": p.path, "outputIndexes": outs, "type": "Plugin"})
    return {"bizCode": "MNNTest", "extraInfo": {"version": "3.6.1"}, "oplists": ops,
            "outputName": list(outputs), "sourceType": "ONNX", "tensorName": names}


def _llm_plugins(spec: _Spec) -> list[_PluginSpec]:
    """The LLM split like compilefornpu splits it: graph 0 takes the positions and embeddings,
    the deepstack layers take deepstack_embeds, the last graph writes the logits."""
    configs = _llm_io(spec)["configs"]
    dims = [{i["name"]: tuple(i["shape"]) for i in c["inputs"]} for c in configs]
    seqs = [d["input_ids"][0] for d in dims]
    n = spec.n_llm_graphs
    ds_graphs = set(range(1, min(DEEPSTACK_LAYERS, n - 1) + 1)) or {0}
    plugins = []
    hidden_in = ""
    for k in range(n):
        ins = ["position_ids", "input_ids"] if k == 0 else [hidden_in]
        if spec.is_visual and k in ds_graphs:
            ins.append("deepstack_embeds")
        last = k == n - 1
        out = "logits" if last else f"/blocks.{k}/Add_output_0"
        in_dims = tuple(tuple(dims[si][i] if i in dims[si] else (1, seq, spec.hidden) for i in ins)
                        for si, seq in enumerate(seqs))
        out_dims = tuple(((1, seq, spec.vocab if last else spec.hidden),) for seq in seqs)
        plugins.append(_PluginSpec(f"qnn/graphllm{k}.bin", (f"graphllm{k}", f"graphllm1_{k}"), tuple(ins),
                                   (out,), in_dims, out_dims))
        hidden_in = out
    return plugins


def _visual_plugins(spec: _Spec) -> list[_PluginSpec]:
    configs = _visual_io(spec)["configs"]
    seqs = [c["inputs"][0]["shape"][0] for c in configs]
    top = [i["name"] for i in configs[0]["inputs"]]
    n = spec.n_visual_graphs
    plugins = []
    hidden_in = ""
    for k in range(n):
        ins = top if k == 0 else [hidden_in]
        last = k == n - 1
        outs = list(spec.visual_outputs) if last else [f"/visual/blocks.{k}/Add_output_0"]
        in_dims = tuple(tuple(tuple(next(i["shape"] for i in c["inputs"] if i["name"] == name))
                              if name in top else (seq, 1024) for name in ins)
                        for c, seq in zip(configs, seqs))
        out_dims = tuple(tuple(((DEEPSTACK_LAYERS, seq // 4, spec.hidden) if o == "deepstack_feature"
                                else (seq // 4, spec.hidden) if last else (seq, 1024)) for o in outs)
                         for seq in seqs)
        names = (f"graphvisual{k}",) + tuple(f"graphvisual{i}_{k}" for i in range(1, len(configs)))
        plugins.append(_PluginSpec(f"qnn/graphvisual{k}.bin", names, tuple(ins), tuple(outs), in_dims, out_dims))
        hidden_in = outs[0]
    return plugins


def _convert_script() -> str:
    # The `mnn` package's converter through `_tools` (never the `mnnconvert` console script,
    # whose wrapper pip-installs a telemetry SDK); the same call harness.checks.quant makes.
    return "import sys, _tools; _tools.mnnconvert(['mnnconvert'] + sys.argv[1:])"


@functools.lru_cache(maxsize=16)
def _stub_bytes(graph_json: str) -> bytes:
    """JSON -> .mnn with the converter (`-f JSON`); cached, since tests write many alike exports."""
    with tempfile.TemporaryDirectory(prefix="vlab-stub-") as tmp:
        src, out = Path(tmp) / "stub.json", Path(tmp) / "stub.mnn"
        src.write_text(graph_json, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-c", _convert_script(), "-f", "JSON", "--modelFile", str(src),
                               "--MNNModel", str(out)], capture_output=True, text=True, timeout=300)
        if "No module named '_tools'" in proc.stderr:
            raise ValueError("writing the NPU stub qnn/*.mnn needs the `mnn` package's converter: "
                             "pip install 'harness[dev]' (or 'harness[mnn]')")
        if not out.is_file() or out.stat().st_size == 0:
            detail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            raise ValueError(f"the mnn converter could not write the NPU stub ({detail[0]})")
        return out.read_bytes()


def edit_stub(path: Path, edit: Callable[[dict], None]) -> None:
    """Dump an NPU stub to its JSON graph, let `edit` change it, and write it back in place
    (tests make the faulty stubs upstream writes this way)."""
    with tempfile.TemporaryDirectory(prefix="vlab-stub-") as tmp:
        out = Path(tmp) / "stub.json"
        subprocess.run([sys.executable, "-c", _convert_script(), "-f", "MNN", "--modelFile", str(path),
                        "--JsonFile", str(out)], capture_output=True, text=True, timeout=300)
        try:
            graph = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: the mnn converter could not dump it ({exc})") from None
    edit(graph)
    Path(path).write_bytes(_stub_bytes(json.dumps(graph, sort_keys=True)))


def set_compiled_dims(graph: dict, tensor: str, dims: Sequence[Sequence[int]]) -> int:
    """In a stub's JSON graph, compile `tensor` with dims[shape index] in every Plugin op that
    takes it (allInputShape rewritten; ranks may change). Returns how many ops changed."""
    names = graph["tensorName"]
    changed = 0
    for op in graph["oplists"]:
        if op.get("type") != "Plugin" or tensor not in [names[i] for i in op.get("inputIndexes", [])]:
            continue
        attrs = {a["key"]: a for a in op["main"]["attr"]}
        graphs = len(attrs["allGraphName"]["list"]["s"])
        flat = attrs["allInputShape"]["list"]["i"]
        ins = [names[i] for i in op["inputIndexes"]]
        per = len(flat) // graphs
        ranks = _ranks_of(graph, op, per)
        rebuilt: list[int] = []
        for si in range(graphs):
            cur = flat[si * per:(si + 1) * per]
            pos = 0
            for name, r in zip(ins, ranks):
                rebuilt += list(dims[si]) if name == tensor else cur[pos:pos + r]
                pos += r
        attrs["allInputShape"]["list"]["i"] = rebuilt
        changed += 1
    return changed


def _ranks_of(graph: dict, op: dict, per: int) -> list[int]:
    names = graph["tensorName"]
    known: dict[int, int] = {}
    for other in graph["oplists"]:
        if other.get("type") == "Input":
            known[other["outputIndexes"][0]] = len(other["main"]["dims"])
        elif other.get("type") == "Plugin":
            attrs = {a["key"]: a for a in other["main"]["attr"]}
            for k, i in enumerate(other.get("outputIndexes", [])):
                if f"o_0_{k}" in attrs:
                    known[i] = len(attrs[f"o_0_{k}"]["tensor"]["dims"])
    ranks = [known.get(i, 0) for i in op["inputIndexes"]]
    if 0 in ranks:
        ranks[ranks.index(0)] = per - sum(ranks)
    if sum(ranks) != per:
        raise ValueError(f"cannot tell the ranks of {[names[i] for i in op['inputIndexes']]}")
    return ranks


def _graph_io(plugins: Sequence[_PluginSpec]) -> dict[str, dict]:
    """Per context binary path: each graph's inputs/outputs as QNN names them (t<K>) with dims,
    for the virtual lab's stand-in of qnn-context-binary-utility."""
    out: dict[str, dict] = {}
    for p in plugins:
        out[p.path] = {g: {"inputs": [list(d) for d in p.input_dims[si]],
                           "outputs": [list(d) for d in p.output_dims[si]]}
                       for si, g in enumerate(p.graph_names)}
    return out


def context_binary_utility_json(path: Path) -> dict:
    """What `qnn-context-binary-utility --json_file` writes for a virtual-lab context binary:
    {"info": {"graphs": [{"info": {"graphName", "graphInputs": [{"info": {"name", "dimensions"}}],
    "graphOutputs": [...]}}], "socModel": N, "dspArch": N}} (the keys harness.compiled_io reads).
    Raises ValueError for a file that is no virtual context binary."""
    head = read_context_header(path)
    graphs = []
    for g in head.get("graphs", []):
        io = head.get("graph_io", {}).get(g, {"inputs": [], "outputs": []})
        graphs.append({"info": {
            "graphName": g,
            "graphInputs": [{"info": {"name": f"t{k}", "dimensions": d}} for k, d in enumerate(io["inputs"])],
            "graphOutputs": [{"info": {"name": f"o{k}", "dimensions": d}} for k, d in enumerate(io["outputs"])],
        }})
    arch = str(head.get("dsp_arch", "")).lstrip("v")
    return {"info": {"graphs": graphs, "socModel": head.get("soc_id"),
                     "dspArch": int(arch) if arch.isdigit() else None}}


def write_sdk_tool(bin_dir: Path) -> Path:
    """An executable `qnn-context-binary-utility` for the virtual lab's QNN SDK (bin_dir is
    <sdk>/bin/x86_64-linux-clang): it answers from the virtual context binaries' headers."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / "qnn-context-binary-utility"
    repo = Path(__file__).resolve().parent.parent
    tool.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"sys.path.insert(0, {str(repo)!r})\n"
        "from virtual_lab.exports import context_binary_utility_json\n"
        "args = dict(zip(sys.argv[1::2], sys.argv[2::2]))\n"
        "try:\n"
        "    data = context_binary_utility_json(args['--context_binary'])\n"
        "except (KeyError, OSError, ValueError) as exc:\n"
        "    print(f'Error: Failed to get context binary info. ({exc})', file=sys.stderr)\n"
        "    sys.exit(1)\n"
        "open(args['--json_file'], 'w').write(json.dumps(data))\n", encoding="utf-8")
    tool.chmod(0o755)
    return tool


def _base_config(spec: _Spec) -> dict:
    cfg: dict[str, Any] = {
        "llm_model": "llm.mnn", "llm_weight": "llm.mnn.weight",
        "backend_type": "cpu", "thread_num": 4, "precision": "low", "memory": "low",
        "sampler_type": spec.sampler_type, "temperature": 0.8, "top_k": 40, "top_p": 0.9,
        "min_p": 0.05, "tfs_z": 1.0, "typical": 0.95, "repetition_penalty": 1.0,
        "presence_penalty": 0.0, "frequency_penalty": 0.0, "penalty_window": 0, "n_gram": 8,
        "ngram_factor": 1.0,
        "tokenizer_file": "tokenizer.mtok" if spec.tokenizer == "mtok" else "tokenizer.txt",
    }
    if spec.is_visual:
        cfg["mllm"] = {"backend_type": "cpu", "thread_num": 4, "precision": "normal", "memory": "low"}
    return cfg


def _llm_config(spec: _Spec) -> dict:
    cfg: dict[str, Any] = {
        "model_type": spec.model_type,
        "hidden_size": spec.hidden,
        "layer_nums": spec.layers,
        "attention_mask": "float",
        "attention_type": "full",
        "is_mrope": spec.is_visual,
        "max_position_embeddings": 262144 if spec.is_visual else 40960,
        "tie_embeddings": True,
        "jinja": {"chat_template": _QWEN_TEMPLATE, "eos": "<|im_end|>"},
    }
    if spec.is_visual:
        cfg.update({
            "mrope_axes": 3,
            "is_visual": True,
            "image_size": 420,
            "image_size_unit": 32,
            "image_min_pixels": 65536,
            "image_max_pixels": 16777216,
            "vision_start": VISION_START,
            "vision_end": VISION_END,
            "image_pad": IMAGE_PAD,
            "video_pad": VIDEO_PAD,
            "image_mean": [127.5, 127.5, 127.5],
            "image_norm": [1 / 127.5] * 3,
            "num_grid_per_side": 48,
            "has_deepstack": True,
        })
    return cfg


def _export_args(spec: _Spec, dst: Path) -> dict:
    return {
        "path": spec.hf_name, "type": None, "tokenizer_path": spec.hf_name, "lora_path": None,
        "gptq_path": None, "dst_path": dst.name, "verbose": False, "test": None, "export": "mnn",
        "onnx_slim": False, "quant_bit": 4, "quant_block": 0, "visual_quant_bit": None,
        "visual_quant_block": None, "lm_quant_bit": 16, "lm_quant_block": 0,
        "mnnconvert": "../../../build/MNNConvert", "ppl": False, "awq": False, "hqq": False,
        "omni": False, "transformer_fuse": False, "transformer_c4": False,
        "group_conv_native": False, "smooth": True, "sym": True, "scale_bit": 16,
        "visual_sym": False, "seperate_embed": True, "lora_split": False, "calib_data": None,
        "act_bit": 16, "embed_bit": 16, "act_sym": True, "quant_config": None,
        "generate_for_npu": True, "skip_weight": False, "tie_word_embeddings": True,
    }


def _manifest(spec: _Spec, dst: Path, llm_bins: list[str], vis_bins: list[str]) -> dict:
    base = ["python3", "generate_llm_qnn.py", "--model", dst.name, "--soc_id", str(spec.soc_id),
            "--dsp_arch", spec.dsp_arch, "--chunk_size", str(spec.chunk_size)]
    commands = [base + ["--model_name", "llm.mnn"]]
    io: dict[str, Any] = {"llm": _llm_io(spec)}
    graphs: dict[str, Any] = {"llm": llm_bins}
    sizes = [f"{w}x{h}" for w, h in spec.image_sizes]
    if spec.is_visual:
        commands.append(base + ["--model_name", "visual.mnn", "--image_sizes", ",".join(sizes),
                                "--reuse_config_qnn_json", "True"])
        io["visual"] = _visual_io(spec)
        graphs["visual"] = vis_bins
    return {
        "format": MANIFEST_FORMAT,
        "about": "harness sidecar: generate_llm_qnn.py keeps no record of its arguments or IO "
                 "json (tmp/input.json is deleted), so the export step writes this file",
        "model_type": spec.model_type,
        "soc_id": spec.soc_id,
        "dsp_arch": spec.dsp_arch,
        "vtcm_mb": spec.vtcm_mb,
        "chunk_size": spec.chunk_size,
        "max_history_token": 0,
        "image_sizes": sizes if spec.is_visual else [],
        "commands": commands,
        "io": io,
        "graphs": graphs,
    }


def _context_header(graphs: list[str], spec: _Spec, graph_io: dict | None = None) -> bytes:
    meta = json.dumps({"graphs": graphs, "soc_id": spec.soc_id, "dsp_arch": spec.dsp_arch,
                       "vtcm_mb": spec.vtcm_mb, "format": "virtual-lab qnn context",
                       "graph_io": graph_io or {}}).encode()
    return CONTEXT_MAGIC + struct.pack("<I", len(meta)) + meta


def read_context_header(path: Path) -> dict:
    """The JSON header of a virtual-lab `qnn/graph*.bin`; ValueError when it has none."""
    with open(path, "rb") as fh:
        head = fh.read(len(CONTEXT_MAGIC) + 4)
        if len(head) < len(CONTEXT_MAGIC) + 4 or not head.startswith(CONTEXT_MAGIC):
            raise ValueError(f"{path}: not a virtual-lab QNN context binary (bad magic)")
        (n,) = struct.unpack("<I", head[len(CONTEXT_MAGIC):])
        try:
            return json.loads(fh.read(n))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: corrupt context header ({exc})") from None


_MNN_HEADER = struct.pack("<II", 0x24, 0) + b"\x1c\x00\x2c\x00\x28\x00\x04\x00"
_TOKENIZER_TXT_HEADER = b"430 1\n3 0 0\n151643 151644 151645\n"


def _derived_faults(spec: _Spec) -> dict[str, dict[str, BehaviourAnswer]]:
    """Faults the knobs imply for the virtual runtime (see the module docstring)."""
    out: dict[str, dict[str, BehaviourAnswer]] = {}
    llm_qnn_pairs = [PAIR_QNN_QNN, PAIR_QNN_CPU]
    if spec.deepstack_placeholder or max(spec.chunk_limits) != spec.chunk_size:
        # Empty key: every prompt; the shortest key, so specific prompts' text still applies
        # but their fault stays unless they override it explicitly.
        out[""] = {p: {"fault": "shape_error"} for p in llm_qnn_pairs}
    if spec.is_visual and "deepstack_feature" not in spec.visual_outputs:
        out["<img>"] = {p: {"fault": "shape_error"} for p in (PAIR_QNN_QNN, PAIR_CPU_QNN)}
    return out


# What the activation-saturation fault (an MLP Mul quantized with an operand's range) makes a
# QNN LLM say: fluent text that drifts or answers something else (issue 11; the dev corpus in
# fixtures/coherence holds real ones).
SATURATION_ANSWERS: dict[str, str] = {
    "capital of France": "The capital of France is France.",
    "Describe a cat": "A cat is a type of a small animal that is a lot of fun to play with the house of the cat.",
    "<img>": "The image shows a white square on a red background of the background.",
}


def _scenario_behaviour(spec: _Spec) -> dict[str, dict[str, BehaviourAnswer]]:
    """Answers and logits a scenario implies for the pairs whose LLM runs on QNN."""
    if spec.scenario == "healthy":
        return {}
    pairs = [PAIR_QNN_QNN, PAIR_QNN_CPU] if spec.is_visual else [PAIR_QNN_CPU]
    out: dict[str, dict[str, BehaviourAnswer]] = {"": {p: {"logits": "saturated"} for p in pairs}}
    for key, text in SATURATION_ANSWERS.items():
        if key != "<img>" or spec.is_visual:
            out[key] = {p: {"text": text} for p in pairs}
    return out


def _merge_behaviour(base: VirtualBehaviour, extra: Mapping[str, dict]) -> VirtualBehaviour:
    prompts = {k: {p: dict(a) for p, a in v.items()} for k, v in base["prompts"].items()}
    for key, pairs in extra.items():
        slot = prompts.setdefault(key, {})
        for pair, ans in pairs.items():
            slot.setdefault(pair, {}).update(ans)
    return {"default": dict(base["default"]), "prompts": prompts}  # type: ignore[typeddict-item]


def _write_export(dst: Path, spec: _Spec, *, missing: Iterable[str],
                  behaviour: VirtualBehaviour | None, overwrite: bool) -> ExportInfo:
    dst = Path(dst)
    if dst.exists():
        if not overwrite:
            raise ValueError(f"{dst}: already exists (pass overwrite=True to replace it)")
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        else:
            dst.unlink()
    dst.mkdir(parents=True)
    fill = _FillWriter(spec.seed)
    total = 0

    base = _base_config(spec)
    for pair in BackendPair.all(visual=spec.is_visual):
        cfg = dict(base)
        if pair.uses_qnn_llm:
            cfg["llm_model"] = "qnn/llm.mnn"
            cfg["chunk_limits"] = list(spec.chunk_limits)
        if pair.uses_qnn_visual:
            cfg["visual_model"] = "qnn/visual.mnn"
        total += _json(dst / pair.config_name, cfg)
    total += _json(dst / "llm_config.json", _llm_config(spec))
    total += _json(dst / "export_args.json", _export_args(spec, dst))

    # The NPU stubs: real MNN models holding one QNN Plugin op per context binary.
    llm_plugins = _llm_plugins(spec)
    stubs = {"qnn/llm.mnn": (llm_plugins, _llm_io(spec)["configs"], ["logits"])}
    vis_plugins = _visual_plugins(spec) if spec.is_visual else []
    if spec.is_visual:
        stubs["qnn/visual.mnn"] = (vis_plugins, _visual_io(spec)["configs"], list(spec.visual_outputs))
    used = 0
    for rel, (plugins, io_configs, outputs) in stubs.items():
        data = _stub_bytes(json.dumps(_stub_graph(io_configs, plugins, outputs), sort_keys=True))
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_bytes(data)
        used += len(data)
        total += len(data)

    # Share of the size budget per big file; the last one takes the rounding remainder.
    budget = int(spec.size_mb * (1 << 20))
    llm_bins = [p.path for p in llm_plugins]
    vis_bins = [p.path for p in vis_plugins]
    tok = "tokenizer.mtok" if spec.tokenizer == "mtok" else "tokenizer.txt"
    shares: list[tuple[str, float, bytes]] = [
        ("llm.mnn", 0.01, _MNN_HEADER),
        (tok, 0.02, _TOKENIZER_TXT_HEADER if spec.tokenizer == "txt" else b"430 4\n"),
        ("embeddings_bf16.bin", 0.15 if spec.is_visual else 0.25, b""),
    ]
    llm_bin_share = 0.2 if spec.is_visual else 0.25
    for p in llm_plugins:
        shares.append((p.path, llm_bin_share / len(llm_plugins),
                       _context_header(list(p.graph_names), spec, _graph_io([p])[p.path])))
    if spec.is_visual:
        shares += [("visual.mnn", 0.02, _MNN_HEADER), ("visual.mnn.weight", 0.12, b"")]
        for p in vis_plugins:
            shares.append((p.path, 0.12 / len(vis_plugins),
                           _context_header(list(p.graph_names), spec, _graph_io([p])[p.path])))
    shares.append(("llm.mnn.weight", 0.0, b""))  # takes what is left (~0.45)
    for name, share, header in shares:
        size = int(budget * share) if share else max(budget - used, 0)
        size = max(size, len(header) + 64)
        used += size
        total += fill.write(dst / name, size, header)

    if spec.sidecar:
        total += _json(dst / MANIFEST_PATH, _manifest(spec, dst, llm_bins, vis_bins))
    beh = behaviour if behaviour is not None else default_behaviour(spec.is_visual)
    beh = _merge_behaviour(validate_behaviour(beh), _derived_faults(spec))
    beh = _merge_behaviour(beh, _scenario_behaviour(spec))
    total += _json(dst / BEHAVIOUR_FILE, beh)

    removed = []
    for rel in missing:
        target = (dst / rel).resolve()
        if dst.resolve() not in target.parents:
            raise ValueError(f"missing={rel!r} points outside the export folder {dst}")
        if not target.exists():
            raise ValueError(f"missing={rel!r}: the export has no such file to remove")
        total -= target.stat().st_size
        target.unlink()
        removed.append(rel)

    files = tuple(sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file()))
    return ExportInfo(
        path=dst, model_type=spec.model_type, configs=dict(VL_CONFIGS if spec.is_visual else TEXT_CONFIGS),
        soc_id=spec.soc_id,
        dsp_arch=spec.dsp_arch, chunk_size=spec.chunk_size, hidden=spec.hidden, files=files,
        image_sizes=spec.image_sizes if spec.is_visual else (), is_visual=spec.is_visual,
        total_bytes=total, missing=tuple(removed),
    )


def _common(kw: dict, *, default_mb: float) -> dict:
    chunk_size = int(kw.pop("chunk_size", 128))
    limits = kw.pop("chunk_limits", None)
    limits = [chunk_size, 1] if limits is None else [int(x) for x in limits]
    arch = str(kw.pop("dsp_arch", "v79"))
    if not arch.startswith("v"):
        arch = "v" + arch
    tokenizer = kw.pop("tokenizer", "mtok")
    if tokenizer not in ("mtok", "txt"):
        raise ValueError(f"tokenizer must be 'mtok' or 'txt', got {tokenizer!r}")
    scenario = str(kw.pop("scenario", "healthy"))
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
    size_mb = float(kw.pop("size_mb", default_mb))
    if size_mb <= 0:
        raise ValueError(f"size_mb must be positive, got {size_mb}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return dict(
        size_mb=size_mb, soc_id=int(kw.pop("soc_id", 69)), dsp_arch=arch,
        vtcm_mb=int(kw.pop("vtcm_mb", 8)), chunk_size=chunk_size, chunk_limits=limits,
        tokenizer=tokenizer, sampler_type=str(kw.pop("sampler_type", "mixed")),
        seed=int(kw.pop("seed", 0)), sidecar=bool(kw.pop("sidecar", True)), scenario=scenario,
    )


def make_qwen3_export(dst: Path, **knobs: Any) -> ExportInfo:
    """Qwen3-0.6B text export with QNN files.

    Knobs: size_mb=4, soc_id=69, dsp_arch="v79", vtcm_mb=8, chunk_size=128 (compiled),
    chunk_limits=None ([chunk_size, 1]; pass e.g. [256, 1] for a mismatch), tokenizer="mtok"|"txt",
    n_llm_graphs=29 (layers + 1), sampler_type="mixed", seed=0, scenario="healthy" (or
    "activation_saturation": QNN-LLM pairs answer fluent but wrong and their logits are
    "saturated"), missing=() (relative paths to
    delete), behaviour=None (virtual_behaviour.json content), overwrite=True, sidecar=True
    (False: no qnn/export_manifest.json, as a real export has none)."""
    kw = dict(knobs)
    missing = kw.pop("missing", ())
    behaviour = kw.pop("behaviour", None)
    overwrite = bool(kw.pop("overwrite", True))
    common = _common(kw, default_mb=4)
    spec = _Spec(
        model_type="qwen3", hf_name="Qwen3-0.6B", hidden=1024, layers=28, vocab=151936,
        is_visual=False, image_sizes=(), deepstack_placeholder=False, visual_outputs=(),
        n_llm_graphs=int(kw.pop("n_llm_graphs", 29)), n_visual_graphs=0, **common,
    )
    if kw:
        raise ValueError(f"make_qwen3_export: unknown knobs {sorted(kw)}")
    return _write_export(Path(dst), spec, missing=missing, behaviour=behaviour, overwrite=overwrite)


def make_qwen3_vl_export(dst: Path, **knobs: Any) -> ExportInfo:
    """Qwen3-VL-2B export with visual part, QNN files and the four backend-matrix configs.

    Knobs: those of make_qwen3_export (size_mb defaults to 6), plus image_sizes=((512, 512),)
    as (width, height) pairs or "WxH" strings (what --image_sizes compiled),
    deepstack_placeholder=False (True: deepstack_embeds compiled as upstream's [3,1,1]),
    visual_outputs=("image_embeds", "deepstack_feature") (upstream QNN keeps only image_embeds),
    n_visual_graphs=1."""
    kw = dict(knobs)
    missing = kw.pop("missing", ())
    behaviour = kw.pop("behaviour", None)
    overwrite = bool(kw.pop("overwrite", True))
    common = _common(kw, default_mb=6)
    sizes = _parse_sizes(kw.pop("image_sizes", ((512, 512),)))
    if not sizes:
        raise ValueError("image_sizes must name at least one WxH size")
    outputs = tuple(kw.pop("visual_outputs", ("image_embeds", "deepstack_feature")))
    spec = _Spec(
        model_type="qwen3_vl", hf_name="Qwen3-VL-2B-Instruct", hidden=2048, layers=28,
        vocab=151936, is_visual=True, image_sizes=sizes,
        deepstack_placeholder=bool(kw.pop("deepstack_placeholder", False)),
        visual_outputs=outputs, n_llm_graphs=int(kw.pop("n_llm_graphs", 29)),
        n_visual_graphs=int(kw.pop("n_visual_graphs", 1)), **common,
    )
    if kw:
        raise ValueError(f"make_qwen3_vl_export: unknown knobs {sorted(kw)}")
    return _write_export(Path(dst), spec, missing=missing, behaviour=behaviour, overwrite=overwrite)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m virtual_lab.exports",
                                     description="Write a realistic MNN export folder.")
    parser.add_argument("model", choices=("qwen3", "qwen3-vl"))
    parser.add_argument("dst", type=Path)
    parser.add_argument("--size-mb", type=float, default=None)
    parser.add_argument("--soc-id", type=int, default=69)
    parser.add_argument("--dsp-arch", default="v79")
    parser.add_argument("--chunk-size", type=int, default=128)
    parser.add_argument("--chunk-limits", default=None, help="comma list, e.g. 256,1")
    parser.add_argument("--image-sizes", default="512x512", help="WxH[,WxH...], width first")
    parser.add_argument("--deepstack-placeholder", action="store_true")
    parser.add_argument("--no-deepstack-feature", action="store_true")
    parser.add_argument("--missing", action="append", default=[])
    parser.add_argument("--tokenizer", choices=("mtok", "txt"), default="mtok")
    parser.add_argument("--no-sidecar", action="store_true", help="no qnn/export_manifest.json, like a real export")
    parser.add_argument("--scenario", choices=SCENARIOS, default="healthy")
    args = parser.parse_args(argv)
    knobs: dict[str, Any] = dict(soc_id=args.soc_id, dsp_arch=args.dsp_arch,
                                 chunk_size=args.chunk_size, missing=args.missing,
                                 tokenizer=args.tokenizer, sidecar=not args.no_sidecar, scenario=args.scenario)
    if args.size_mb is not None:
        knobs["size_mb"] = args.size_mb
    if args.chunk_limits:
        knobs["chunk_limits"] = [int(x) for x in args.chunk_limits.split(",")]
    try:
        if args.model == "qwen3":
            info = make_qwen3_export(args.dst, **knobs)
        else:
            knobs["image_sizes"] = [s for s in args.image_sizes.split(",") if s.strip()]
            knobs["deepstack_placeholder"] = args.deepstack_placeholder
            if args.no_deepstack_feature:
                knobs["visual_outputs"] = ("image_embeds",)
            info = make_qwen3_vl_export(args.dst, **knobs)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"path": str(info.path), "model_type": info.model_type,
                      "configs": info.configs, "files": len(info.files),
                      "total_bytes": info.total_bytes}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
