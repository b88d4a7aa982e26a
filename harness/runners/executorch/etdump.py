"""ETDump analysis for QNN runs, through ExecuTorch's own Inspector (optional extra).

Importable without `executorch`: only `load_rows()` needs it, and it raises a HarnessError
saying how to install the extra. The analysis itself works on plain row dicts with the
Inspector's DataFrame columns (docs/executorch-runner.md#etdump-and-the-inspector), so it is
independent of pandas.

QNN profiles are in cycles: the Inspector must be built with CYCLES/CYCLES time scales
(mixing CYCLES with another scale raises), and the columns then read `p50 (cycles)` etc.
Prefill and decode calls of one method are merged into one row per instruction with one
`raw` value per call, so the split is by call index: the first `prefill_calls` values are
prefill, the rest decode.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import subprocess
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

_META_EVENTS = {"Method::execute", "Program::load_method", "Method::init", "DELEGATE_CALL", "OPERATOR_CALL"}
# ExecuTorch 1.5 lowers `.to(dtype)` to dim_order_ops._to_dim_order_copy (seen in a real ETDump).
_COPY_MARKERS = ("to_copy", "_to_copy", "to_dim_order_copy", "convert", "quantize", "dequantize")


def executorch_available() -> bool:
    try:
        import executorch.devtools  # noqa: F401
    except ImportError:
        return False
    return True


def load_rows(etdump: Path, etrecord: Path | None = None, *, qnn: bool = True,
              debug_buffer: Path | None = None) -> list[dict[str, Any]]:
    """Inspector rows as dicts (one per event). qnn=True uses CYCLES for both time scales."""
    try:
        from executorch.devtools import Inspector
        from executorch.devtools.inspector import TimeScale
    except ImportError:
        raise HarnessError("ETDump analysis needs ExecuTorch's Inspector: pip install 'harness[executorch]' "
                           "(heavy: torch + executorch)") from None
    if not Path(etdump).is_file():
        raise HarnessError(f"{etdump}: ETDump file not found; pull it from the device (--etdump_path) first")
    kwargs: dict[str, object] = {"etdump_path": str(etdump)}
    if etrecord is not None:
        kwargs["etrecord"] = str(etrecord)
    if debug_buffer is not None:
        kwargs["debug_buffer_path"] = str(debug_buffer)
    if qnn:
        kwargs["source_time_scale"] = TimeScale.CYCLES
        kwargs["target_time_scale"] = TimeScale.CYCLES
    try:
        # The Inspector warns about every kwarg and symbol it cannot map back; none of it
        # changes the rows.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            previous = logging.root.manager.disable
            logging.disable(logging.WARNING)
            try:
                inspector = Inspector(**kwargs)
                df = inspector.to_dataframe(include_units=True)
            finally:
                logging.disable(previous)
    except subprocess.CalledProcessError as exc:
        # ExecuTorch decodes the ETDump with its bundled flatc; observed with 1.5.1: a dump
        # written by a program loaded with a debug buffer fails with "string contains non-utf8
        # bytes" (the same program without one decodes).
        raise HarnessError(f"{etdump}: ExecuTorch's flatc could not decode this ETDump (exit {exc.returncode}); "
                           "profile without a debug buffer / intermediate-output dumping and pull it again") from None
    return [dict(r) for r in df.to_dict(orient="records")]


@dataclass
class OpRow:
    name: str
    block: str
    delegated: bool
    backend: str | None
    op_types: tuple[str, ...]
    raw: tuple[float, ...]
    p50: float | None

    @property
    def total(self) -> float:
        return float(sum(self.raw))

    @property
    def zero_cost(self) -> bool:
        return bool(self.raw) and all(v == 0 for v in self.raw)

    @property
    def is_copy(self) -> bool:
        text = " ".join((self.name,) + self.op_types).lower()
        return any(m in text for m in _COPY_MARKERS)


@dataclass
class EtdumpReport:
    unit: str  # "cycles" | "ms" | ...
    rows: list[OpRow]
    prefill_calls: int = 1
    totals: dict[str, float] = field(default_factory=dict)

    @property
    def ops(self) -> list[OpRow]:
        return [r for r in self.rows if r.name not in _META_EVENTS]

    @property
    def delegated(self) -> list[OpRow]:
        return [r for r in self.ops if r.delegated]

    @property
    def not_delegated(self) -> list[OpRow]:
        return [r for r in self.ops if not r.delegated]

    @property
    def zero_cost_ops(self) -> list[OpRow]:
        return [r for r in self.ops if r.zero_cost]

    def zero_cost_in(self, phase: str) -> list[OpRow]:
        """Ops that cost nothing measurable in one phase ("prefill" or "decode"): e.g. XNNPACK
        reports whole microseconds, so a tiny GEMM reads 0 in every decode call."""
        idx = 0 if phase == "prefill" else 1
        return [r for r in self.ops if (vals := self.split(r)[idx]) and all(v == 0 for v in vals)]

    @property
    def calls(self) -> int:
        """Method calls in the dump (the longest `raw`)."""
        return max((len(r.raw) for r in self.rows), default=0)

    def backends(self) -> dict[str, dict[str, float]]:
        """Per delegate backend: its DELEGATE_CALL time (the whole delegated call, what the
        method waited for) and its op rows, by phase."""
        out: dict[str, dict[str, float]] = {}
        for r in self.rows:
            if r.name == "DELEGATE_CALL" and r.backend:
                b = out.setdefault(r.backend, {"calls_time": 0.0, "prefill": 0.0, "decode": 0.0, "ops": 0.0})
                p, d = self.split(r)
                b["calls_time"] += r.total
                b["prefill"] += sum(p)
                b["decode"] += sum(d)
        for r in self.delegated:
            if r.backend:
                out.setdefault(r.backend, {"calls_time": 0.0, "prefill": 0.0, "decode": 0.0, "ops": 0.0})["ops"] += 1
        return out

    def method_time(self) -> dict[str, float]:
        """`Method::execute` time by phase (the whole call, delegated or not)."""
        pre = dec = 0.0
        for r in self.rows:
            if r.name == "Method::execute":
                p, d = self.split(r)
                pre, dec = pre + sum(p), dec + sum(d)
        return {"prefill": pre, "decode": dec}

    def copy_share(self) -> float:
        """Share of op time spent in to_copy / (de)quantize conversions (requantization)."""
        total = sum(r.total for r in self.ops)
        return sum(r.total for r in self.ops if r.is_copy) / total if total else 0.0

    def split(self, row: OpRow) -> tuple[list[float], list[float]]:
        """(prefill values, decode values) of a merged row."""
        return list(row.raw[:self.prefill_calls]), list(row.raw[self.prefill_calls:])

    def phase_totals(self) -> dict[str, float]:
        pre = dec = 0.0
        for r in self.ops:
            p, d = self.split(r)
            pre += sum(p)
            dec += sum(d)
        return {"prefill": pre, "decode": dec}

    def table(self, top: int | None = None) -> list[dict[str, Any]]:
        """Per-op rows, most expensive first: name, delegated, backend, total, share, prefill, decode."""
        total = sum(r.total for r in self.ops) or 1.0
        out = []
        for r in sorted(self.ops, key=lambda r: r.total, reverse=True)[:top]:
            p, d = self.split(r)
            out.append({"name": r.name, "delegated": r.delegated, "backend": r.backend,
                        "op_types": list(r.op_types), f"total ({self.unit})": r.total,
                        "share": r.total / total, f"prefill ({self.unit})": sum(p),
                        f"decode ({self.unit})": sum(d), "calls": len(r.raw), "zero_cost": r.zero_cost})
        return out

    def to_json(self) -> dict[str, Any]:
        not_delegated = sorted(self.not_delegated, key=lambda r: r.total, reverse=True)
        return {"unit": self.unit, "calls": self.calls, "prefill_calls": self.prefill_calls, "ops": len(self.ops),
                "delegated": len(self.delegated), "backends": self.backends(),
                "delegated_ops": [{"name": r.name, "backend": r.backend, "total": r.total} for r in self.delegated],
                "not_delegated": [r.name for r in not_delegated],
                "not_delegated_by_time": [{"name": r.name, "op_types": list(r.op_types), "total": r.total}
                                          for r in not_delegated],
                "zero_cost": [r.name for r in self.zero_cost_ops],
                "zero_cost_decode": [r.name for r in self.zero_cost_in("decode")], "copy_share": self.copy_share(),
                "phases": self.phase_totals(), "method": self.method_time(), "table": self.table(20)}


def _unit_of(row: Mapping[str, object]) -> str:
    for key in row:
        if isinstance(key, str) and key.startswith("p50 (") and key.endswith(")"):
            return key[5:-1]
    return "ms"


def _floats(values: Any) -> tuple[float, ...]:
    if values is None:
        return ()
    try:
        return tuple(float(v) for v in values)
    except TypeError:
        return (float(values),)


def analyse_rows(rows: Iterable[Mapping[str, Any]], *, prefill_calls: int = 1) -> EtdumpReport:
    """Build the report from Inspector rows (dicts with the DataFrame's columns)."""
    rows = list(rows)
    if prefill_calls < 0:
        raise HarnessError(f"prefill_calls must be >= 0, got {prefill_calls}")
    unit = _unit_of(rows[0]) if rows else "cycles"
    out = []
    for r in rows:
        p50 = r.get(f"p50 ({unit})", r.get("p50"))
        backend = r.get("delegate_backend_name")
        out.append(OpRow(
            name=str(r.get("event_name", "")), block=str(r.get("event_block_name", "")),
            delegated=bool(r.get("is_delegated_op")),
            backend=None if backend is None or (isinstance(backend, float) and math.isnan(backend)) else str(backend),
            op_types=tuple(str(t) for t in (r.get("op_types") or ())),
            raw=_floats(r.get("raw")), p50=None if p50 is None else float(p50),
        ))
    return EtdumpReport(unit, out, prefill_calls)


def analyse_etdump(etdump: Path, etrecord: Path | None = None, *, qnn: bool = True,
                   prefill_calls: int = 1) -> EtdumpReport:
    return analyse_rows(load_rows(etdump, etrecord, qnn=qnn), prefill_calls=prefill_calls)


def format_table(report: EtdumpReport, top: int = 20) -> str:
    rows = report.table(top)
    lines = [f"{'op':48} {'deleg':5} {'total':>14} {'share':>6} {'prefill':>12} {'decode':>12}"]
    for r in rows:
        lines.append(f"{r['name'][:48]:48} {'yes' if r['delegated'] else 'no':5} "
                     f"{r[f'total ({report.unit})']:14.1f} {r['share']:6.1%} "
                     f"{r[f'prefill ({report.unit})']:12.1f} {r[f'decode ({report.unit})']:12.1f}")
    return "\n".join(lines)


__all__: Sequence[str] = ["EtdumpReport", "OpRow", "analyse_etdump", "analyse_rows", "executorch_available",
                          "format_table", "load_rows"]


# ----------------------------------------------------------------------------- CLI
# CLI: `python -m harness.runners.executorch.etdump ETDUMP [--etrecord F] [--json] [--cycles] [--prefill-calls N]`.
#
# Prints the per-op analysis of an ETDump through ExecuTorch's Inspector (the `executorch` extra):
# the delegated ops with their backend, the non-delegated ops by time, ops that cost nothing
# measurable, and the prefill/decode split (the first `--prefill-calls` calls of the method are
# the prefill; docs/executorch-runner.md#etdump-and-the-inspector). Without an ETRecord the
# Inspector still marks delegated ops but cannot name their backend. `--cycles`: a QNN profile
# (counts in cycles, CYCLES/CYCLES time scales); the default reads a CPU run's ns as ms.

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
    ap = argparse.ArgumentParser(prog="python -m harness.runners.executorch.etdump", description="Per-op analysis of an ETDump.")
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


if __name__ == "__main__":
    sys.exit(main())
