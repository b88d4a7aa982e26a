"""CLI: `python -m harness.checks.coherence FILE.jsonl [--json] [--reference-model CONFIG]`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.checks.coherence.rows import RowsError, Tally, load_rows
from harness.checks.coherence.rules import judge, quote
from harness.checks.surprise import ReferenceUnavailable, Scorer


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.checks.coherence",
        description="Judge generated texts (JSONL rows with prompt, text, optional reference and "
                    "label) as coherent or garbled.")
    parser.add_argument("file", type=Path, help="JSONL file, one object per line")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object per row (verdict, reasons, scores) and nothing else")
    parser.add_argument("--reference-model", type=Path, metavar="CONFIG",
                        help="score each row's tokens with this export on the host (PyPI mnn) and "
                             "use that as one more signal; rows may also carry 'surprise'")
    parser.add_argument("--system-prompt", metavar="TEXT",
                        help="the export's system prompt (its chat template's default); an answer "
                             "copying 5+ words of it in a row is garbled. Rows may carry 'system'")
    args = parser.parse_args(argv)
    try:
        rows = load_rows(args.file)
        scorer = Scorer(args.reference_model) if args.reference_model else None
    except (RowsError, ReferenceUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tally = Tally()
    for row in rows:
        surprise = row.surprise
        if surprise is None and scorer is not None and row.prompt is not None:
            surprise = scorer.score(row.prompt, row.text)
        v = judge(row.text, prompt=row.prompt, reference=row.reference, expect_any=row.expect_any,
                  surprise=surprise, system=row.system or args.system_prompt)
        tally.add(row.label, v.verdict)
        if args.json:
            out = {"line": row.line, **v.to_json()}
            if row.label is not None:
                out["label"] = row.label
            print(json.dumps(out, ensure_ascii=False))
        else:
            mark = ""
            if row.label in ("coherent", "garbled"):
                mark = "  ok" if row.label == v.verdict else f"  WRONG (label {row.label})"
            print(f"line {row.line}: {v.verdict}{mark}  {quote(row.text, 70)}")
            for reason in v.reasons:
                print(f"    - {reason}")
    if not args.json:
        print(tally.summary())
    return 0


def run() -> int:
    try:
        return main()
    except BrokenPipeError:
        # `... --json | head`: the reader left; not an error worth a traceback.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps interpreter exit quiet
        return 0
