"""CLI: `python -m harness.runners.etdump ETDUMP [--etrecord F] [--json] [--cycles] [--prefill-calls N]`.

Prints the per-op analysis of an ETDump through ExecuTorch's Inspector (the `executorch` extra):
the delegated ops with their backend, the non-delegated ops by time, ops that cost nothing
measurable, and the prefill/decode split (the first `--prefill-calls` calls of the method are
the prefill; docs/executorch-runner.md#etdump-and-the-inspector). Without an ETRecord the
Inspector still marks delegated ops but cannot name their backend. `--cycles`: a QNN profile
(counts in cycles, CYCLES/CYCLES time scales); the default reads a CPU run's ns as ms.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from collections.abc import Sequence

from harness.errors import HarnessError
from harness.runners.etdump import EtdumpReport, analyse_etdump, format_table


def _text(rep: EtdumpReport, top: int) -> str:
    j = rep.to_json()
    lines = [f"{j['calls']} calls ({rep.prefill_calls} prefill), {j['ops']} op rows, {j['delegated']} delegated; "
             f"time ({rep.unit}): prefill {j['phases']['prefill']:.4g}, decode {j['phases']['decode']:.4g} "
             f"(Method::execute {j['method']['prefill']:.4g} / {j['method']['decode']:.4g})"]
    for name, b in j["backends"].items():
        lines.append(f"backend {name}: {int(b['ops'])} op rows, delegate calls {b['calls_time']:.4g} {rep.unit} "
                     f"(prefill {b['prefill']:.4g}, decode {b['decode']:.4g})")
    lines.append("delegated ops: " + (", ".join(f"{d['name']} [{d['backend'] or 'backend unknown: no ETRecord'}]"
                                                for d in j["delegated_ops"]) or "none"))
    lines.append("not delegated, by time: " + ", ".join(
        f"{d['name']} {d['total']:.4g}" for d in j["not_delegated_by_time"][:top]))
    lines.append("zero cost in every call: " + (", ".join(j["zero_cost"]) or "none"))
    lines.append("zero cost in decode: " + (", ".join(j["zero_cost_decode"]) or "none"))
    lines.append(format_table(rep, top))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.runners.etdump", description=__doc__.split("\n")[2])
    ap.add_argument("etdump", help="the ETDump file (.etdp)")
    ap.add_argument("--etrecord", help="the export's ETRecord (names the delegate backends and op types)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--cycles", action="store_true", help="a QNN profile in cycles (CYCLES/CYCLES time scales)")
    ap.add_argument("--prefill-calls", type=int, default=1, help="calls of the method that were prefill (default 1)")
    ap.add_argument("--top", type=int, default=20, help="rows of the table (default 20)")
    args = ap.parse_args(argv)
    try:
        rep = analyse_etdump(Path(args.etdump), Path(args.etrecord) if args.etrecord else None, qnn=args.cycles,
                             prefill_calls=args.prefill_calls)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(rep.to_json()) if args.json else _text(rep, args.top))
    return 0
