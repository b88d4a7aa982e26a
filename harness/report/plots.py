"""Plots (PNG): performance trends from the history database, a localization's SQNR per op.

Uses matplotlib's object API with the Agg canvas directly: no pyplot, no global figure
state, no display needed (safe in worker threads and on headless lab hosts).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.evidence import Localization, OpGap
from harness.hostfiles import write_atomic
from harness.report.history import History

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# matplotlib is imported where a plot is drawn: its import is 1.5-3 s under load, and a night
# with no speed history (a stopped one, a first one) draws none (docs/lab-scale.md).

_SQNR_TOP = 120.0  # dB: the per-op plot's ceiling (healthy ops sit at 60-95 dB, docs/localize.md)
_LABELS = {"decode_tps": "decode tokens/s", "prefill_tps": "prefill tokens/s", "load_s": "load time (s)"}


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def plot_device_trend(history: History, device: str, out_dir: Path, *, nights: int = 30,
                      metrics: tuple[str, ...] = ("decode_tps", "prefill_tps")) -> Path | None:
    """One PNG per device: a panel per metric, a line per (model, backend pair). None: no data."""
    series = {m: history.trend(device, m, nights=nights) for m in metrics}
    if not any(series.values()):
        return None
    night_order = [n for n, _ in reversed(history.nights(limit=nights))]
    index = {n: i for i, n in enumerate(night_order)}
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 2.6 * len(metrics)), dpi=90)
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(metrics), 1, squeeze=False, sharex=True)[:, 0]
    for ax, metric in zip(axes, metrics):
        for (model, pair), points in sorted(series[metric].items()):
            xs = [index[n] for n, _, _ in points if n in index]
            ys = [v for n, _, v in points if n in index]
            ax.plot(xs, ys, marker="o", label=f"{model} {pair}".strip())
        ax.set_ylabel(_LABELS.get(metric, metric))
        ax.grid(True, alpha=0.3)
        if series[metric]:
            ax.legend(fontsize=7, loc="best")
    axes[0].set_title(f"{device}: last {len(night_order)} nights")
    ticks = list(range(len(night_order)))
    axes[-1].set_xticks(ticks)
    axes[-1].set_xticklabels([n[:15] for n in night_order], rotation=30, ha="right", fontsize=7)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    fig.savefig(png, format="png")
    return write_atomic(out_dir / f"trend-{_safe_name(device)}.png", png.getvalue())


def plot_trends(history: History, out_dir: Path, devices: list[str] | None = None, *, nights: int = 30) -> dict[str, Path]:
    """device -> PNG path, for devices that have speed history."""
    out = {}
    for device in devices if devices is not None else history.devices():
        path = plot_device_trend(history, device, Path(out_dir), nights=nights)
        if path is not None:
            out[device] = path
    return out


def _block(layer: str) -> str:
    """The model block an op's module belongs to: "layers.1.down" -> "layers.1"; "head" -> "head"."""
    parts = layer.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and parts[1].isdigit() else parts[0]


def layer_runs(ops: Sequence[OpGap]) -> list[tuple[str, int, int]]:
    """(block, first op index, last op index) of consecutive ops of one block, in graph order;
    ops without a layer join the run they sit in."""
    runs: list[tuple[str, int, int]] = []
    for o in sorted((o for o in ops if o.layer), key=lambda o: o.index):
        block = _block(o.layer)
        if runs and runs[-1][0] == block:
            runs[-1] = (block, runs[-1][1], o.index)
        else:
            runs.append((block, o.index, o.index))
    return runs


def _shade_layers(ax: Axes, ops: Sequence[OpGap]) -> None:
    """Every other model block shaded and each block named along the top: where along the model
    an op sits reads without the node names."""
    runs = [r for r in layer_runs(ops) if r[0].startswith("layers.")]
    for i, (block, lo, hi) in enumerate(runs):
        if i % 2 == 0:
            ax.axvspan(lo - 0.5, hi + 0.5, color="0.92", zorder=0)
        ax.text((lo + hi) / 2, _SQNR_TOP + 2, block.replace("layers.", "layer "), ha="center", va="bottom",
                fontsize=8, color="0.35")


def plot_localization(result: Localization) -> bytes:
    """SQNR per op along the graph (PNG): judged ops joined, unjudged ones grey, the model's layers
    shaded and named, the threshold dashed, the first departure marked (a red line and dot) and named
    in a boxed label clear of the curve (report/departs.py embeds it in the page)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.8), dpi=96)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    judged = [o for o in result.ops if o.judged]
    shown = [o for o in result.ops if not o.judged]
    _shade_layers(ax, result.ops)
    # Identical tensors are at the evidence's 200 dB cap: drawn at the top so the low end stays readable.
    ax.plot([o.index for o in judged], [min(o.sqnr_db, _SQNR_TOP) for o in judged], marker=".", lw=1, label="judged op")
    if shown:
        ax.scatter([o.index for o in shown], [min(max(o.sqnr_db, 0.0), _SQNR_TOP) for o in shown], s=8, c="0.6",
                   label="shown, not judged")
    ax.axhline(result.threshold_db, ls="--", c="0.4", lw=1, label=f"threshold {result.threshold_db:g} dB")
    low = min([-5.0, *(o.sqnr_db - 5 for o in judged)])
    if result.first is not None:
        f = result.first
        ax.axvline(f.index, c="red", lw=1, ls=":", zorder=4)
        ax.scatter([f.index], [f.sqnr_db], s=90, c="red", zorder=5, label="first departure")
        right = f.index > (min(o.index for o in result.ops) + max(o.index for o in result.ops)) / 2
        # Above the threshold, on the side with room: the curve after a departure runs low.
        ax.annotate(f"first departure: {f.node}\n{f.layer or 'no layer'}, {f.sqnr_db:.1f} dB", (f.index, f.sqnr_db),
                    xytext=(f.index, result.threshold_db + 0.3 * (_SQNR_TOP - result.threshold_db)),
                    ha="right" if right else "left", fontsize=9, color="red", zorder=6,
                    bbox={"boxstyle": "round", "fc": "white", "ec": "red", "lw": 0.8},
                    arrowprops={"arrowstyle": "-", "color": "red", "lw": 0.8})
    ax.set_ylim(low, _SQNR_TOP + 12)
    ax.set_xlabel("op (reference graph order)")
    ax.set_ylabel("SQNR (dB) vs CPU")
    ax.set_title(f"per-op SQNR against the CPU reference ({result.format or 'format unknown'})", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: the curve keeps the whole frame
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    return png.getvalue()
