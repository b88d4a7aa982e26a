"""The per-op cycles plot of a night (PNG): every QNN op of a profiled program, tonight's cycles
against the last good night's, the ops named slower (harness/report/op_history.py) in red and
labelled with their module, the model's layers named along the top. Matplotlib's object API on
the Agg canvas, as plots.py."""

from __future__ import annotations

import io
import re
from pathlib import Path

import harness.report.op_history as op_history
from harness.hostfiles import write_atomic
from harness.report.history import History

_MAX_LABELS = 8  # slower ops named on the plot; the page's regressions list them all


def _block(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and parts[1].isdigit() else ""


def plot_night_ops(history: History, night_id: str, out_dir: Path) -> dict[str, Path]:
    """"device: program" -> PNG, for each profiled program of the night with a last good night."""
    started = history.started_at(night_id)
    slower = op_history.slower_ops(history.db, night_id)
    out: dict[str, Path] = {}
    for key, ops in op_history.night_ops(history.db, night_id).items():
        base_night = op_history.last_good_night(history.db, key, started)
        if base_night is None:
            continue
        base = op_history.night_ops(history.db, base_night, good_only=True).get(key, {})
        named = {c.node for c in slower if (c.device, c.model, c.program) == key}
        png = _plot(key, ops, base, base_night, named)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"ops-{key[0]}-{key[2]}")
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        out[f"{key[0]}: {key[2]}"] = write_atomic(Path(out_dir) / f"{name}.png", png)
    return out


def _plot(key: op_history.Key, ops: dict[str, tuple[str, str, float, str]],
          base: dict[str, tuple[str, str, float, str]], base_night: str, named: set[str]) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # only when drawn: plots.py says why
    from matplotlib.figure import Figure

    nodes = list(ops)
    unit = next(iter(ops.values()))[3]
    fig = Figure(figsize=(10, 3.8), dpi=96)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    xs = range(len(nodes))
    ax.bar(xs, [ops[n][2] for n in nodes], color=["#c62828" if n in named else "#4a78b0" for n in nodes],
           width=0.8, label="tonight")
    had = [(i, base[n][2]) for i, n in enumerate(nodes) if n in base]
    ax.scatter([i for i, _ in had], [v for _, v in had], marker="_", s=40, c="black", zorder=3,
               label=f"last good night ({base_night})")
    ax.set_yscale("log")
    top = max(v[2] for v in ops.values()) * 3
    runs: list[tuple[str, int, int]] = []  # (block, first, last): consecutive ops of one layer
    for i, n in enumerate(nodes):
        block = _block(ops[n][1])
        if not block:
            continue
        if runs and runs[-1][0] == block:
            runs[-1] = (block, runs[-1][1], i)
        else:
            runs.append((block, i, i))
    for block, lo, hi in runs:
        if int(block.split(".")[1]) % 2 == 0:
            ax.axvspan(lo - 0.5, hi + 0.5, color="0.93", zorder=0)
        if hi - lo >= 3:
            ax.text((lo + hi) / 2, top, block.replace("layers.", "layer "), ha="center", fontsize=8, color="0.35")
    for k, n in enumerate(sorted(named, key=lambda n: nodes.index(n))[:_MAX_LABELS]):
        i = nodes.index(n)
        ax.annotate(ops[n][1] or n, (i, ops[n][2]), fontsize=7, color="#c62828", xytext=(-60, -14 - 11 * k),
                    textcoords="offset points", ha="right",
                    arrowprops={"arrowstyle": "-", "color": "#c62828", "lw": 0.5})
    ax.set_ylim(top=top * 2)
    ax.set_xlabel("QNN op (graph order)")
    ax.set_ylabel(unit)
    ax.set_title(f"{key[0]} {key[2]}: per-op cycles; red: slower than the last good night", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    return png.getvalue()


__all__ = ["plot_night_ops"]
