"""CLI: `python -m harness.checks.localize DIR [--json] [--format F] [--threshold DB]` on pulled
files (the debug build's etrecord.bin + qnn_encodings.json and a run's etdump.etdp +
debug_output.bin); exit 0 no departure, 1 departed, 2 undecidable (docs/localize.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.checks.localize.layout import DebugFiles
from harness.checks.localize.run import localize
from harness.errors import HarnessError
from harness.evidence import Localization, Outcome

EXIT = {Outcome.NONE: 0, Outcome.DEPARTED: 1, Outcome.UNDECIDABLE: 2}


def render(result: Localization) -> str:
    lines = [f"per-op comparison against the CPU reference ({result.format or 'format unknown'}, "
             f"threshold {result.threshold_db:g} dB SQNR): {sum(o.judged for o in result.ops)} ops judged, "
             f"{len(result.ops)} compared", f"  {result.summary()}"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.checks.localize", description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--json", action="store_true", help="print one JSON object and nothing else")
    ap.add_argument("--format", help="quantization format (default: the encodings file's)")
    ap.add_argument("--threshold", type=float, help="dB SQNR (default: the format's calibrated one)")
    args = ap.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder}: no such folder; pass the folder holding etrecord.bin, qnn_encodings.json, "
              "etdump.etdp and debug_output.bin", file=sys.stderr)
        return EXIT[Outcome.UNDECIDABLE]
    try:
        result = localize(DebugFiles(args.folder), args.format, args.threshold, keep_stdout=True)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT[Outcome.UNDECIDABLE]
    print(result.to_json() if args.json else render(result))
    return EXIT[result.outcome]
