"""The real SmolLM2 MNN export, pushed through the real adb server to a virtual device and run
there on the real MNN engine (PyPI `mnn`), then parsed and checked like any device run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from harness.checks.coherence import judge
from harness.provision import provision_model, provision_runtime
from harness.runners import Overlay
from harness.runners.llm_demo import LlmDemoRunner
from harness.transport import open_transport

REPO = Path(__file__).resolve().parents[2]
EXPORT = REPO.parent / "shared" / "models" / "smollm2-135m-instruct-mnn-npu16"

pytestmark = [
    pytest.mark.real_engine,
    pytest.mark.skipif(not EXPORT.is_dir(), reason=f"{EXPORT} is absent (the shared real export)"),
    pytest.mark.skipif(importlib.util.find_spec("MNN") is None, reason="the `mnn` extra is not installed"),
]

FRANCE = "What is the capital of France? Answer briefly."
# The prompts the model's README reports looping on with greedy decoding.
LOOPING = ("Explain what a transformer model is in one short sentence.", "Describe a cat in two sentences.")


@pytest.fixture(scope="module")
def real_run(vlab):
    transport = open_transport(vlab.inventory.get("oneplus13"))
    runtime = provision_runtime(transport, vlab.runtime_dir("v79"), qnn_sdk=vlab.qnn_sdk_dir)
    # The export records no QNN target (a CPU export): accept it knowingly.
    model = provision_model(transport, EXPORT, allow_unknown_target=True)
    result = LlmDemoRunner(transport, runtime, model).run([FRANCE, *LOOPING], backend="cpu",
                                                          overlay=Overlay(greedy=True, max_new_tokens=48))
    yield model, result
    transport.close()


def test_export_is_pushed_and_read_from_llm_config(real_run) -> None:
    model, _ = real_run
    assert model.model_type == "llama"  # from llm_config.json, not the folder name
    assert model.configs == {"cpu": "config.json"}


def test_france_prompt_answered_on_the_device(real_run) -> None:
    _, result = real_run
    proc = result.runs[0]
    assert proc.classification.ok, proc.stdout + proc.stderr
    assert proc.parsed.texts[0].strip() == "The capital of France is Paris."
    summary = proc.parsed.summary
    assert summary is not None and summary.prompt_tokens == 40
    assert judge(proc.parsed.texts[0], prompt=FRANCE, expect_any=("Paris",)).coherent


def test_looping_answers_flagged_as_degenerate_repetition(real_run) -> None:
    _, result = real_run
    for proc, prompt in zip(result.runs[1:], LOOPING):
        assert proc.classification.ok  # the run itself is fine: only the text is broken
        text = proc.parsed.texts[0]
        verdict = judge(text, prompt=prompt)
        assert verdict.verdict == "garbled", text
        assert any("repetition" in r or "repeated" in r for r in verdict.reasons), verdict.reasons
