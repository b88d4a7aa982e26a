"""`python -m harness.checks.mrope STDOUT [--json]`: judge a captured `llm_demo` stdout's
`[POSDBG]` dumps as the suites do (harness.checks.mrope.verdict). The reference comes from the
dump itself (each prompt's first prefill call, docs/posdbg.md#a-reference-without-the-tokenizer)
unless image grids are given. Exit 0 pass, 1 fail, 2 unchecked, 4 usage error."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.checks.mrope.reference import Image
from harness.checks.mrope.verdict import FAIL, PASS, judge_log

EXIT = {PASS: 0, FAIL: 1}
EXIT_UNCHECKED = 2


def _grid(text: str) -> Image:
    try:
        h, w = (int(x) for x in text.lower().split("x"))
        return Image(h=h, w=w)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--grid takes the LLM grid after merge as HxW, e.g. 14x7; got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.checks.mrope", description=__doc__.split("\n\n")[0])
    ap.add_argument("stdout", type=Path, help="a captured llm_demo stdout (with [POSDBG] lines); '-' reads stdin")
    ap.add_argument("--json", action="store_true", help="print one JSON object: verdict, findings (kind, ...)")
    ap.add_argument("--grid", type=_grid, action="append", metavar="HxW",
                    help="an image's LLM grid after merge, in prompt order (default: read from the dump)")
    ap.add_argument("--prompt-tokens", type=int, help="the prompt's token count (default: the dump's listSize)")
    args = ap.parse_args(argv)
    if str(args.stdout) == "-":
        text = sys.stdin.read()
    else:
        try:
            text = args.stdout.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            print(f"cannot read {args.stdout}: {exc.strerror}; pass a captured llm_demo stdout", file=sys.stderr)
            return 4
    verdict = judge_log(text, images=args.grid, prompt_len=args.prompt_tokens)
    if args.json:
        print(json.dumps(verdict.to_dict(), indent=2))
    else:
        print(verdict.explain())
    return EXIT.get(verdict.verdict, EXIT_UNCHECKED)
