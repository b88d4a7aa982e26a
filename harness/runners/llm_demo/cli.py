"""CLI: `python -m harness.runners.llm_demo STDOUT_FILE [--stderr FILE] [--exit-code N]
[--logcat FILE] [--prompts N] [--max-tokens N]`: one JSON object per captured run (see the package doc)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.runners.llm_demo.result import analyse, result_json
from harness.runners.prompts import count_prompt_lines

DEFAULT_MAX_NEW_TOKENS = 512  # llmconfig.hpp (docs/llm-demo-output.md#arguments)


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise HarnessError(f"cannot read {what} file {path}: {exc.strerror}; pass an existing file") from None


def _named_file(stdout: str, label: str, base: Path) -> Path | None:
    """The file a run names in its stdout (`prompt file is X`, `config path is X`), looked up
    as printed, then beside the stdout file (a kept run folder holds prompts.txt there)."""
    m = None
    for m in re.finditer(rf"^{label} (.+)$", stdout, re.M):  # noqa: B007 (keeps the last match)
        pass
    if m is None:
        return None
    named = Path(m.group(1).strip())
    for p in ([named] if named.is_absolute() else [named, base / named, base / named.name]):
        if p.is_file():
            return p
    return None


def prompt_count_of_run(stdout: str, base: Path) -> int | None:
    """How many prompts the run read from its prompt file; None when the file is not here."""
    path = _named_file(stdout, "prompt file is", base)
    if path is None:
        return None
    try:
        return count_prompt_lines(path.read_text(encoding="utf-8", errors="replace")) or None
    except OSError:
        return None


def token_limit_of_run(stdout: str, base: Path) -> int | None:
    """max_new_tokens of the config the run names (MNN's default 512 when it sets none)."""
    path = _named_file(stdout, "config path is", base)
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m harness.runners.llm_demo",
        description="Parse a captured llm_demo run and print one JSON object (class, texts, summary, errors). "
                    "Non-finite summary values (nan, -nan, inf) are null; their printed text is in summary_nonfinite.")
    ap.add_argument("stdout", help="file with llm_demo's stdout")
    ap.add_argument("--stderr", help="file with its stderr")
    ap.add_argument("--exit-code", type=int, default=0, help="exit code (128+N or -N for signal N)")
    ap.add_argument("--logcat", help="file with `logcat -d -v threadtime` output of the run")
    ap.add_argument("--prompts", type=int, help="number of prompts in the prompt file (default: read the prompt "
                    "file the run names, `prompt file is ...`, beside the stdout file or from the cwd)")
    ap.add_argument("--max-tokens", type=int, help="the run's decode limit (default: max_token_number is unknown "
                    "here, so max_new_tokens of the config the run names, 512 when it sets none)")
    args = ap.parse_args(argv)
    try:
        stdout = _read(args.stdout, "stdout")
        stderr = _read(args.stderr, "stderr") if args.stderr else ""
        logcat = _read(args.logcat, "logcat") if args.logcat else None
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    base = Path(args.stdout).resolve().parent
    prompts = args.prompts if args.prompts is not None else prompt_count_of_run(stdout, base)
    limit = args.max_tokens if args.max_tokens is not None else token_limit_of_run(stdout, base)
    try:
        parsed, cls = analyse(stdout, stderr, exit_code=args.exit_code, logcat=logcat, prompts=prompts,
                              token_limit=limit)
    except HarnessError as exc:  # the failure catalogue itself is unreadable
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result_json(parsed, cls, exit_code=args.exit_code), ensure_ascii=False, allow_nan=False))
    return 0
