"""CLI: `python -m harness.runners.executorch STDOUT [--stderr F] [--exit-code N] [--json]`.

Classifies a captured run of ExecuTorch's LLM runner (`qnn_llama_runner`, or the real runner on
the host) as `python -m harness.runners.llm_demo` does: one object with `class`, the signature
that decided it, the parsed stats (`stats`: the last `PyTorchObserver` object; `runs`: each
prompt's stats and derived metrics), the `[stats.h]` summaries and what does not add up
(`problems`). Without `--json` the same in a few lines of text."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.runners.executorch.output import parse_run
from harness.runners.signatures import Classification, load_signatures

PROG = "python -m harness.runners.executorch"


def classify_capture(stdout: str, stderr: str, exit_code: int | None) -> dict[str, object]:
    run = parse_run(stdout, stderr)
    cls = load_signatures().classify(stdout=stdout, stderr=stderr, exit_code=exit_code)
    if cls.ok and run.stats is None:
        msg = "no PyTorchObserver line on stdout (the runner stopped before its report)"
        cls = Classification("runtime-error", msg, cls.matches, cls.errors + [msg])
    return {**cls.to_json(), "exit_code": exit_code, **run.to_json()}


def _text(result: dict[str, Any]) -> str:
    lines = [f"class: {result['class']}" + (f" ({result['signature']})" if result.get("signature") else "")]
    if result.get("reason"):
        lines.append(f"reason: {result['reason']}")
    for i, run in enumerate(result["runs"], 1):
        m = run["metrics"]
        decode = "absent (0 ms span)" if m["decode_tok_s"] is None else f"{m['decode_tok_s']} tok/s"
        lines.append(f"prompt {i}: {m['prompt_tokens']} prompt tokens, {m['produced_tokens']} produced "
                     f"(generated_tokens {m['generated_tokens']}), prefill {m['prefill_tok_s']} tok/s, decode {decode}")
    lines += [f"problem: {p}" for p in result["problems"]]
    lines += [f"error: {e}" for e in result["errors"][:5]]
    if result.get("hint"):
        lines.append(f"hint: {result['hint']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description="Classify a captured run of ExecuTorch's LLM runner.")
    ap.add_argument("stdout", help="file with the runner's stdout")
    ap.add_argument("--stderr", help="file with its stderr (the [file.cpp:N] log and the stats summary)")
    ap.add_argument("--exit-code", type=int, default=0, help="its exit code (128+N for signal N)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    try:
        stdout = Path(args.stdout).read_bytes().decode("utf-8", "replace")
        stderr = Path(args.stderr).read_bytes().decode("utf-8", "replace") if args.stderr else ""
    except OSError as exc:
        print(f"error: cannot read {exc.filename}: {exc.strerror}; pass an existing file", file=sys.stderr)
        return 2
    result = classify_capture(stdout, stderr, args.exit_code)
    print(json.dumps(result, ensure_ascii=False) if args.json else _text(result))
    return 0
