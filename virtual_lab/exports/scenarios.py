"""What an export's knobs script for the virtual runtime, on top of virtual_behaviour.json.

The generator pre-scripts the faults its knobs imply: a `[3,1,1]` deepstack placeholder or a
chunk_limits/chunk_size mismatch makes every prompt on a QNN LLM a "shape_error"; a visual graph
without `deepstack_feature` makes image prompts ("<img>") on a QNN visual a "shape_error".
Missing files, soc/arch mismatch and image sizes are left for the runtime to detect itself.
A scenario (knob `scenario=`, one of behaviour.SCENARIOS) scripts answers and logits.
"""

from __future__ import annotations

from virtual_lab.exports.behaviour import PAIR_CPU_QNN, PAIR_QNN_CPU, PAIR_QNN_QNN, BehaviourAnswer
from virtual_lab.exports.spec import ExportSpec


def derived_faults(spec: ExportSpec) -> dict[str, dict[str, BehaviourAnswer]]:
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


def scenario_behaviour(spec: ExportSpec) -> dict[str, dict[str, BehaviourAnswer]]:
    """Answers and logits a scenario implies for the pairs whose LLM runs on QNN."""
    if spec.scenario == "healthy":
        return {}
    pairs = [PAIR_QNN_QNN, PAIR_QNN_CPU] if spec.is_visual else [PAIR_QNN_CPU]
    out: dict[str, dict[str, BehaviourAnswer]] = {"": {p: {"logits": "saturated"} for p in pairs}}
    for key, text in SATURATION_ANSWERS.items():
        if key != "<img>" or spec.is_visual:
            out[key] = {p: {"text": text} for p in pairs}
    return out
