"""The float reference of an ExecuTorch llama export, built by the harness from what the export was
built from (docs/etllama.md#the-float-reference-the-harness-builds-reference): the checkpoint and params the exporter took, run
through ExecuTorch's own model definition from the wheel (`executorch.examples.models.llama`'s
`Llama2Model`, the class `export_llm` builds its program from, here in float and without the KV
cache), over the suite's prompts as the export's tokenizer encodes them. It writes `reference/` in
the layout the float-reference check reads (docs/executorch-reference.md#layout): per prompt its
tokens plus the float model's greedy continuation and the teacher-forced logits over them.

    python -m harness.etllama.reference --checkpoint C.pth --params P.json --tokenizer T.json --out DIR

No exporter is patched: the reference is a build of its own (a plan build's `reference:`,
docs/exports.md#float-references), cached and laid beside the programs."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checks import INDEX, REFERENCE_DIR, SCHEMA
from harness.errors import ArtifactError, HarnessError

# The suite's prompts (docs/executorch-reference.md#prompts) and the float model's continuation length.
PROMPTS = ("What is the capital of France? Answer briefly.",
           "List three colours of the rainbow.",
           "Write one sentence about the sea.")
NEW_TOKENS = 16
MODEL_NOTE = "float eager (torch): ExecuTorch's Llama2Model from {checkpoint} and {params}, no KV cache"


@dataclass(frozen=True)
class ReferenceInputs:
    checkpoint: Path
    params: Path
    tokenizer: Path
    prompts: tuple[str, ...] = PROMPTS
    new_tokens: int = NEW_TOKENS


def load_float_model(checkpoint: Path, params: Path, context: int) -> Any:
    """ExecuTorch's llama model (the wheel's own definition) in float, full-sequence forward."""
    from executorch.examples.models.llama.model import Llama2Model
    from executorch.extension.llm.export.config.llm_config import LlmConfig

    config = LlmConfig()
    config.base.checkpoint = str(checkpoint)
    config.base.params = str(params)
    config.model.use_kv_cache = False
    config.debug.generate_full_logits = True  # where Llama2Model reads it (not model.*): logits at every position
    config.export.max_seq_length = context
    config.export.max_context_length = context
    return Llama2Model(llm_config=config).get_eager_model().eval()


def _encode(tokenizer: Path, text: str) -> list[int]:
    from tokenizers import Tokenizer

    ids: list[int] = Tokenizer.from_file(str(tokenizer)).encode(text).ids
    return ids


def teacher_forced(model: Any, tokens: Sequence[int]) -> Any:
    """[len(tokens) - 1, V] float32: row t is the float model's distribution for tokens[t + 1]."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([list(tokens)]))
    if tuple(logits.shape[:2]) != (1, len(tokens)):
        raise ArtifactError(f"the float model gave logits of shape {list(logits.shape)} for {len(tokens)} tokens, "
                            "not one row per position")
    return logits[0, :-1].float().numpy()


def greedy(model: Any, ids: Sequence[int], new_tokens: int) -> list[int]:
    import torch

    out = list(ids)
    with torch.no_grad():
        for _ in range(new_tokens):
            out.append(int(model(torch.tensor([out]))[0, -1].argmax()))
    return out[len(ids):]


def build(inputs: ReferenceInputs, out: Path) -> Path:
    """Write `out/reference/` (under a temporary name, then renamed); returns the index."""
    import numpy as np

    for label, path in (("--checkpoint", inputs.checkpoint), ("--params", inputs.params),
                        ("--tokenizer", inputs.tokenizer)):
        if not path.is_file():
            raise ArtifactError(f"{label} {path}: no such file")
    encoded = [_encode(inputs.tokenizer, text) for text in inputs.prompts]
    context = max(len(ids) for ids in encoded) + inputs.new_tokens + 1
    model = load_float_model(inputs.checkpoint, inputs.params, context)
    tmp = out / f"{REFERENCE_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    entries = []
    for i, (text, ids) in enumerate(zip(inputs.prompts, encoded)):
        tokens = ids + greedy(model, ids, inputs.new_tokens)
        np.save(tmp / f"p{i}.npy", teacher_forced(model, tokens).astype(np.float32))
        entries.append({"id": f"p{i}", "text": text, "prompt_tokens": len(ids), "tokens": tokens, "logits": f"p{i}.npy"})
    note = MODEL_NOTE.format(checkpoint=inputs.checkpoint.name, params=inputs.params.name)
    (tmp / INDEX).write_text(json.dumps({"schema": SCHEMA, "model": note, "prompts": entries}, indent=1) + "\n",
                             encoding="utf-8")
    final = out / REFERENCE_DIR
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return final / INDEX


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.etllama.reference", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path, required=True, help="the checkpoint the exporter took (base.checkpoint)")
    ap.add_argument("--params", type=Path, required=True, help="its params.json (base.params)")
    ap.add_argument("--tokenizer", type=Path, required=True, help="the export's tokenizer.json")
    ap.add_argument("--out", type=Path, required=True, help="the folder reference/ is written into")
    ap.add_argument("--prompts", type=Path, help="a file of prompts, one a line (default: the suite's three)")
    ap.add_argument("--new-tokens", type=int, default=NEW_TOKENS)
    args = ap.parse_args(argv)
    prompts = PROMPTS
    if args.prompts:
        prompts = tuple(ln for ln in args.prompts.read_text(encoding="utf-8").splitlines() if ln.strip())
    try:
        index = build(ReferenceInputs(args.checkpoint, args.params, args.tokenizer, prompts, args.new_tokens), args.out)
    except HarnessError as exc:
        print(f"reference: {exc}", file=sys.stderr)
        return 4
    print(f"{index}: {len(prompts)} prompts, {args.new_tokens} greedy tokens each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
