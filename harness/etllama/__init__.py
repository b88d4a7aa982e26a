"""ExecuTorch's llama family from a GGUF file: the checkpoint ExecuTorch's llama model takes
(`gguf_checkpoint`: Meta-named float32 weights, `params.json`, an HF `tokenizer.json`), and the float
reference the harness builds from it with ExecuTorch's own model definition (docs/etllama.md).

Light to import: torch, numpy and the `gguf` package are imported by the functions that use them."""
