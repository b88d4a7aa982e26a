"""Performance trend plots (PNG) from the history database.

Uses matplotlib's object API with the Agg canvas directly: no pyplot, no global figure
state, no display needed (safe in worker threads and on headless lab hosts).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.hostfiles import write_atomic
from harness.report.history import History

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
