"""`python -m harness.runners.logits_diff STDOUT [--stderr F] [--exit-code N] [--json]
[--chunk-a N --chunk-b N]`: the verdict of a captured run, as text or one JSON object."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.runners.diff_tools import TOOL
from harness.runners.logits_diff.judge import analyse


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise HarnessError(f"cannot read {what} file {path}: {exc.strerror}; pass an existing file") from None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m harness.runners.logits_diff",
        description=f"Parse a captured {TOOL} run and give the teacher-forced verdict "
                    "(agree, drift, disagree; error when no step was compared).")
    ap.add_argument("stdout", help=f"file with {TOOL}'s stdout")
    ap.add_argument("--stderr", help="file with its stderr")
    ap.add_argument("--exit-code", type=int, default=0, help="the tool's exit code")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a text report")
    ap.add_argument("--chunk-a", type=int, help="config A's prefill chunk (chunk_limits[0]); omit when unchunked")
    ap.add_argument("--chunk-b", type=int, help="config B's prefill chunk")
    args = ap.parse_args(argv)
    try:
        stdout = _read(args.stdout, "stdout")
        stderr = _read(args.stderr, "stderr") if args.stderr else ""
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    res = analyse(stdout, stderr, exit_code=args.exit_code, chunk_a=args.chunk_a, chunk_b=args.chunk_b)
    if args.json:
        print(json.dumps(res.to_json(), ensure_ascii=False, allow_nan=False))
    else:
        print(res.describe())
    return 0

