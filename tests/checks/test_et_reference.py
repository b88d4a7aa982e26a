"""The reference agreement of an ExecuTorch run, judged on real runs first: the HTP emulator's
saved outputs of ../shared/models/et-qnn-host against their fake-quant references pass, the
same outputs against the wrong reference (or shifted) fail; the real TextLLMRunner's greedy
pieces reproduce the eager tokens 16 of 16, a changed token is found where it is."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.checks import GreedyReference, compare_outputs, generated_after, match_tokens, vocab_pieces
from tests.shared import SHARED

REPO = Path(__file__).resolve().parents[2]
PTE = SHARED / "models" / "et-qnn-host" / "pte"
LLM = SHARED / "models" / "et-qnn-host" / "llm"


@pytest.fixture(autouse=True)
def _shared() -> None:
    if not (PTE / "qwen3-16a4w-sm8650.qnn_host_out.npy").is_file():
        pytest.skip(f"{PTE.parent} is absent: these checks are judged on ../shared's real QNN runs")


@pytest.mark.parametrize("name", ["qwen3-16a4w-sm8650", "qwen3-8a8w-sm8650", "lnprobe-8a8w-sa8295",
                                  "lnprobe-16a4w-ln16a16w-sm8650"])
def test_the_emulators_outputs_agree_with_their_fake_quant_reference(name: str) -> None:
    out, ref = np.load(PTE / f"{name}.qnn_host_out.npy"), np.load(PTE / f"{name}.ref_fakequant.npy")
    match = compare_outputs(out, ref)
    assert match.passed, match.describe()
    recorded = json.loads((PTE / f"{name}.run.json").read_text())["vs_ref_fakequant"]
    assert match.cosine == pytest.approx(recorded["cos"], abs=1e-5)
    assert match.argmax_share == pytest.approx(recorded["argmax_agree"])


def test_a_wrong_or_shifted_output_fails() -> None:
    out = np.load(PTE / "qwen3-16a4w-sm8650.qnn_host_out.npy")
    ref = np.load(PTE / "qwen3-16a4w-sm8650.ref_fakequant.npy")
    # The other quantization of the same model is close, as it should be: 8a8w's reference passes.
    assert compare_outputs(out, np.load(PTE / "qwen3-8a8w-sm8650.ref_fakequant.npy")).passed
    permuted = ref[..., np.random.default_rng(0).permutation(ref.shape[-1])]  # a wrong vocabulary order
    assert not compare_outputs(out, permuted).passed
    shifted = np.roll(out, 1, axis=1)  # every position's logits one token late
    bad = compare_outputs(shifted, ref)
    assert not bad.passed and "argmax" in bad.problem
    wrong_shape = compare_outputs(out[:, :16], out)
    assert not wrong_shape.passed and "shape" in wrong_shape.problem
    nan = out.copy()
    nan[0, 0, 0] = np.nan
    assert not compare_outputs(nan, out).passed


def test_the_real_runners_greedy_tokens_match_eager() -> None:
    ref = GreedyReference.read(LLM / "kv-16a8w-sm8650.greedy_ref.json")
    run = json.loads((LLM / "kv-16a8w-sm8650.run.json").read_text())
    text = ref.prompt + "".join(run["generated_pieces"]) + "\n"
    pieces = vocab_pieces(LLM / "tokenizer.json")
    generated = generated_after(text, ref.prompt)
    assert generated is not None
    match = match_tokens(generated, ref.tokens["fakequant"], pieces, reference="fakequant")
    assert (match.agreed, match.total, match.passed, match.first_difference) == (16, 16, True, None)
    assert ref.seq_len == 24 == run["generation_config"]["seq_len"]


def test_a_changed_token_is_found_where_it_is() -> None:
    ref = GreedyReference.read(LLM / "kv-16a8w-sm8650.greedy_ref.json")
    pieces = vocab_pieces(LLM / "tokenizer.json")
    ids = list(ref.tokens["fakequant"])
    ids[2] = (ids[2] + 1) % 256
    early = match_tokens("".join(pieces[i] for i in ids), ref.tokens["fakequant"], pieces, reference="fakequant")
    assert (early.agreed, early.first_difference, early.passed) == (2, 2, False)
    late = list(ref.tokens["fakequant"])
    late[14] = (late[14] + 1) % 256
    tail = match_tokens("".join(pieces[i] for i in late), ref.tokens["fakequant"], pieces, reference="fakequant")
    assert tail.agreed == 14 and tail.passed  # 14/16 >= 75 %: one late flip of a quantized model passes
    assert generated_after("some other text", ref.prompt) is None
