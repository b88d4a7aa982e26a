"""Realistic MNN export folders (Qwen3-0.6B text, Qwen3-VL-2B with visual) for the virtual lab.

Used by tests, the demo, provisioning and the runners. File names and config keys follow what
MNN's `llmexport.py` and `npu/generate_llm_qnn.py` write (mnn-llm.md §2); file *contents* are
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
    qnn/export_manifest.json         the harness's own sidecar, see below
    virtual_behaviour.json           virtual lab only, see below

Backend pairs are "<visual backend>/<llm backend>", as users name the matrix (QNN/CPU = visual on
QNN, LLM on CPU; harness/provision/types.py), each "qnn" or "cpu"; a config's pair is
`backend_pair_of(config)` (a model without a visual part reports "cpu" for the visual side).

qnn/export_manifest.json (harness sidecar, format "harness.qnn_export_manifest/1")
-----------------------------------------------------------------------------
`generate_llm_qnn.py` records none of its arguments: it writes its IO spec to
`<cache_path>/input.json` (`makeIOJson` / `makeVLIOJson`) and deletes the cache dir at the end.
The harness therefore expects the export step to leave this sidecar next to the QNN files::

    {"format": "harness.qnn_export_manifest/1",
     "model_type": "qwen3_vl", "soc_id": 69, "dsp_arch": "v79", "vtcm_mb": 8,
     "chunk_size": 128, "max_history_token": 0,
     "image_sizes": ["512x512"],                      # as passed to --image_sizes: WIDTH x HEIGHT
     "commands": [[argv of each generate_llm_qnn.py run]],
     "io": {"llm":    {"configs": [<prefill>, <decode>]},          # makeIOJson's format
            "visual": {"configs": [<one per image size>]}},        # makeVLIOJson's format
     "graphs": {"llm": ["qnn/graphllm0.bin", ...], "visual": ["qnn/graphvisual0.bin"]}}

Each IO config is `{"inputs": [{"name", "shape", "type"?, "value"?}], "outputs": [names]}`.
`harness.checks.shapes` reads it.

Binary headers (virtual lab only): `qnn/graph*.bin` start with b"QNNCTX\\0\\1", a little-endian
u32 length and a JSON header {"graphs": [...], "soc_id", "dsp_arch", "vtcm_mb"}, then filler.
`read_context_header(path)` returns that JSON, so the virtual runtime can fail with
`QNN: Failed to validate binary` when soc/arch do not match the device.

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
null overrides. Faults (what the virtual llm_demo should print, mnn-llm.md §1/§4):

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
`[POSDBG]` lines of `harness.checks.mrope.posdbg_lines` for the prompt's segments
(`virtual_prompt_segments` gives the virtual lab's token-count rule; use it for both the
"prompt tokens num" line and the dumps so tests can rebuild the reference).

The generator pre-scripts the faults its knobs imply: a `[3,1,1]` deepstack placeholder or a
chunk_limits/chunk_size mismatch makes every prompt on a QNN LLM a "shape_error"; a visual graph
without `deepstack_feature` makes image prompts ("<img>") on a QNN visual a "shape_error".
Missing files, soc/arch mismatch and image sizes are left for the runtime to detect itself.

CLI: python -m virtual_lab.exports {qwen3,qwen3-vl} DST [--size-mb N] [--soc-id 69 --dsp-arch v79]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TypedDict

PAIR_QNN_QNN = "qnn/qnn"
PAIR_CPU_QNN = "qnn/cpu"  # LLM on CPU, visual on QNN (pairs are written visual/llm)
PAIR_QNN_CPU = "cpu/qnn"  # LLM on QNN, visual on CPU (or no visual part)
PAIR_CPU_CPU = "cpu/cpu"

VL_CONFIGS: dict[str, str] = {
    PAIR_QNN_QNN: "config_qnn.json",
    PAIR_CPU_QNN: "config_cpu_llm_qnn_visual.json",
    PAIR_QNN_CPU: "config_qnn_cpu_visual.json",
    PAIR_CPU_CPU: "config.json",
}
TEXT_CONFIGS: dict[str, str] = {PAIR_QNN_CPU: "config_qnn.json", PAIR_CPU_CPU: "config.json"}

LOGITS_MODES = ("exact", "close", "saturated", "null")
# Scenarios a generated export can carry (knob `scenario=`): scripted answers and logits.
SCENARIOS = ("healthy", "activation_saturation")
FAULTS = (
    "crash", "abort", "hang", "shape_error", "poison_next", "init_error", "qnn_lib_missing",
    "binary_mismatch",
)
POSDBG_MODES = ("ok", "chunk_local_bug", "past_end")
MANIFEST_PATH = "qnn/export_manifest.json"
MANIFEST_FORMAT = "harness.qnn_export_manifest/1"
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
    """'<visual>/<llm>' for a runtime config: a model path under qnn/ runs on the QNN plugin."""
    llm = "qnn" if str(config.get("llm_model", "llm.mnn")).startswith("qnn/") else "cpu"
    vis = "qnn" if str(config.get("visual_model", "visual.mnn")).startswith("qnn/") else "cpu"
    return f"{vis}/{llm}"


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
    """`[POSDBG]` lines the virtual runtime prints for `prompt` (delegates to harness.checks.mrope)."""
    from harness.checks import mrope  # lazy: virtual_lab may use the harness's reference

    ref = mrope.reference_positions(virtual_prompt_segments(prompt, llm_config))
    return mrope.posdbg_lines(ref, chunk_limits=chunk_limits, mode=mode,
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


def _context_header(graphs: list[str], spec: _Spec) -> bytes:
    meta = json.dumps({"graphs": graphs, "soc_id": spec.soc_id, "dsp_arch": spec.dsp_arch,
                       "vtcm_mb": spec.vtcm_mb, "format": "virtual-lab qnn context"}).encode()
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

    configs = VL_CONFIGS if spec.is_visual else TEXT_CONFIGS
    base = _base_config(spec)
    for pair, name in configs.items():
        cfg = dict(base)
        vis_b, llm_b = pair.split("/")  # pairs are visual/llm
        if llm_b == "qnn":
            cfg["llm_model"] = "qnn/llm.mnn"
            cfg["chunk_limits"] = list(spec.chunk_limits)
        if spec.is_visual and vis_b == "qnn":
            cfg["visual_model"] = "qnn/visual.mnn"
        total += _json(dst / name, cfg)
    total += _json(dst / "llm_config.json", _llm_config(spec))
    total += _json(dst / "export_args.json", _export_args(spec, dst))

    # Share of the size budget per big file; the last one takes the rounding remainder.
    budget = int(spec.size_mb * (1 << 20))
    llm_bins = [f"qnn/graphllm{i}.bin" for i in range(spec.n_llm_graphs)]
    vis_bins = [f"qnn/graphvisual{i}.bin" for i in range(spec.n_visual_graphs)] if spec.is_visual else []
    tok = "tokenizer.mtok" if spec.tokenizer == "mtok" else "tokenizer.txt"
    shares: list[tuple[str, float, bytes]] = [
        ("llm.mnn", 0.01, _MNN_HEADER),
        ("qnn/llm.mnn", 0.005, _MNN_HEADER),
        (tok, 0.02, _TOKENIZER_TXT_HEADER if spec.tokenizer == "txt" else b"430 4\n"),
        ("embeddings_bf16.bin", 0.15 if spec.is_visual else 0.25, b""),
    ]
    llm_bin_share = 0.2 if spec.is_visual else 0.25
    for i, b in enumerate(llm_bins):
        shares.append((b, llm_bin_share / len(llm_bins),
                       _context_header([f"graphllm{i}", f"graphllm1_{i}"], spec)))
    if spec.is_visual:
        shares += [("visual.mnn", 0.02, _MNN_HEADER), ("qnn/visual.mnn", 0.005, _MNN_HEADER),
                   ("visual.mnn.weight", 0.12, b"")]
        extra_graphs = [f"graphvisual{k}_" for k in range(1, len(spec.image_sizes))]
        for i, b in enumerate(vis_bins):
            names = [f"graphvisual{i}"] + [f"{g}{i}" for g in extra_graphs]
            shares.append((b, 0.12 / len(vis_bins), _context_header(names, spec)))
    shares.append(("llm.mnn.weight", 0.0, b""))  # takes what is left (~0.45)
    used = 0
    for name, share, header in shares:
        size = int(budget * share) if share else max(budget - used, 0)
        size = max(size, len(header) + 64)
        used += size
        total += fill.write(dst / name, size, header)

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
        path=dst, model_type=spec.model_type, configs=dict(configs), soc_id=spec.soc_id,
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
        seed=int(kw.pop("seed", 0)), scenario=scenario,
    )


def make_qwen3_export(dst: Path, **knobs: Any) -> ExportInfo:
    """Qwen3-0.6B text export with QNN files.

    Knobs: size_mb=4, soc_id=69, dsp_arch="v79", vtcm_mb=8, chunk_size=128 (compiled),
    chunk_limits=None ([chunk_size, 1]; pass e.g. [256, 1] for a mismatch), tokenizer="mtok"|"txt",
    n_llm_graphs=29 (layers + 1), sampler_type="mixed", seed=0, scenario="healthy" (or
    "activation_saturation": QNN-LLM pairs answer fluent but wrong and their logits are
    "saturated"), missing=() (relative paths to
    delete), behaviour=None (virtual_behaviour.json content), overwrite=True."""
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
    parser.add_argument("--scenario", choices=SCENARIOS, default="healthy")
    args = parser.parse_args(argv)
    knobs: dict[str, Any] = dict(soc_id=args.soc_id, dsp_arch=args.dsp_arch,
                                 chunk_size=args.chunk_size, missing=args.missing,
                                 tokenizer=args.tokenizer, scenario=args.scenario)
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
