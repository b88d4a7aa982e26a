"""virtual_behaviour.json: what the virtual runtime answers, per prompt and backend pair.

Backend pairs are "<visual backend>/<llm backend>", as users name the matrix (QNN/CPU = visual on
QNN, LLM on CPU; harness/pairs.py decides them), each "qnn" or "cpu"; a config's pair is
`backend_pair_of(config)` (the virtual lab always names both sides: a model without a visual part
reports "cpu" for the visual side, so its QNN config is "cpu/qnn").

The file (virtual lab only; `VirtualBehaviour` below)::

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
(`virtual_lab.exports.segments.virtual_prompt_segments` gives the virtual lab's token-count rule;
use it for both the "prompt tokens num" line and the dumps so tests can rebuild the reference).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from harness.pairs import BackendPair

PAIR_QNN_QNN = "qnn/qnn"
PAIR_CPU_QNN = "qnn/cpu"  # LLM on CPU, visual on QNN (pairs are written visual/llm)
PAIR_QNN_CPU = "cpu/qnn"  # LLM on QNN, visual on CPU (or no visual part)
PAIR_CPU_CPU = "cpu/cpu"

LOGITS_MODES = ("exact", "close", "saturated", "null")
# Scenarios a generated export can carry (knob `scenario=`): scripted answers and logits.
SCENARIOS = ("healthy", "activation_saturation")
FAULTS = (
    "crash", "abort", "hang", "shape_error", "poison_next", "init_error", "qnn_lib_missing",
    "binary_mismatch",
)
POSDBG_MODES = ("ok", "chunk_local_bug", "past_end")
BEHAVIOUR_FILE = "virtual_behaviour.json"


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
    return data  # type: ignore[return-value]  # validated key by key above; JSON has no TypedDict


def load_behaviour(path: Path | str) -> VirtualBehaviour:
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


def merge_behaviour(base: VirtualBehaviour, extra: Mapping[str, dict]) -> VirtualBehaviour:
    """A copy of `base` with `extra`'s prompt -> pair -> answer entries laid over it, field by field."""
    prompts = {k: {p: dict(a) for p, a in v.items()} for k, v in base["prompts"].items()}
    for key, pairs in extra.items():
        slot = prompts.setdefault(key, {})
        for pair, ans in pairs.items():
            slot.setdefault(pair, {}).update(ans)
    return {"default": dict(base["default"]), "prompts": prompts}  # type: ignore[typeddict-item]  # the default answer is copied whole from a validated one
