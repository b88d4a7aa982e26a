"""A real ETDump of an LLM run on the host (docs/executorch-runner.md#a-real-etdump-on-the-host).

ExecuTorch's LLM runner has no ETDump switch, so the .pte is run through the module API with
ETDump on (`portable_lib._load_for_executorch(pte, enable_etdump=True)`): one prefill call with
the whole prompt, then one call per decoded token (greedy), then the ETDump is written. The
Inspector (harness.runners.executorch.etdump) merges the calls into one row per instruction, one value per
call, prefill first: `prefill_calls` = 1.

    python -m harness.hostrt.executorch.etdump --model_path M.pte --tokenizer_path tokenizer.json \
        --prompt TEXT --decode_tokens N --etdump_path OUT.etdp

prints one JSON line (calls, token ids). Needs the `executorch` extra (torch, tokenizers); the
tokenizer must be a Hugging Face `tokenizer.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.hostrt.executorch.runner import EXIT_NO_ENGINE, _register_custom_ops


def profile(model_path: Path, tokenizer_path: Path, prompt: str, decode_tokens: int, etdump_path: Path) -> dict[str, object]:
    _register_custom_ops()
    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch
    from tokenizers import Tokenizer

    module = _load_for_executorch(str(model_path), enable_etdump=True)
    tok = Tokenizer.from_file(str(tokenizer_path))
    # Tokenized as the LLM runner does with its default GenerationConfig (num_bos 0: no BOS), so
    # the prefill call sees the runner's prompt_tokens.
    ids = tok.encode(prompt, add_special_tokens=False).ids

    def step(tokens: list[int], pos: int) -> int:
        out = module.forward((torch.tensor([tokens], dtype=torch.long), torch.tensor([pos], dtype=torch.long)))
        return int(out[0].reshape(-1, out[0].shape[-1])[-1].argmax())

    produced = [step(ids, 0)]
    for i in range(decode_tokens):
        produced.append(step([produced[-1]], len(ids) + i))
    tmp = etdump_path.with_name(f".{etdump_path.name}.tmp")
    module.write_etdump_result_to_file(str(tmp), "")
    os.replace(tmp, etdump_path)
    return {"etdump": str(etdump_path), "prefill_calls": 1, "decode_calls": decode_tokens, "prompt_tokens": len(ids),
            "prompt_ids": ids, "produced_ids": produced, "text": tok.decode(produced)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.hostrt.executorch.etdump", description=__doc__.split("\n")[0])
    ap.add_argument("--model_path", required=True)
    ap.add_argument("--tokenizer_path", required=True)
    ap.add_argument("--prompt", default="The answer to the ultimate question is")
    ap.add_argument("--decode_tokens", type=int, default=4)
    ap.add_argument("--etdump_path", required=True)
    args = ap.parse_args(argv)
    try:
        result = profile(Path(args.model_path), Path(args.tokenizer_path), args.prompt, args.decode_tokens,
                         Path(args.etdump_path))
    except ImportError as exc:
        print(f"[Error]: ExecuTorch is not installed ({exc}); pip install 'harness[executorch]'", file=sys.stderr)
        return EXIT_NO_ENGINE
    except RuntimeError as exc:
        print(f"RuntimeError: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
