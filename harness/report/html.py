"""A static HTML report for one night, from its records (and the history for trends).

Sections: devices (status, quarantine reasons), regressions, the backend matrix per
device (verdict, speed, teacher-forced agreement, an excerpt of the generated text), where
each backend departs from the CPU reference (teacher-forced: the first disagreeing step, the
text around it and the rows near it), failures grouped by signature, and trend plots. Every piece of text goes through `esc` (model output can hold anything,
markup and control characters included). One self-contained file plus plots/*.png.
"""

from __future__ import annotations

import html
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from harness.outcomes import FailureClass
from harness.report.history import History, Regression
from harness.report.junit import xml_safe
from harness.report.plots import plot_trends
from harness.report.records import TestRecord, by_device, teacher_forced_of

_CSS = Path(__file__).with_name("style.css")
TEXT_EXCERPT = 240


def esc(value: object) -> str:
    """Escape for HTML text and attribute values; control characters made visible."""
    return html.escape(xml_safe(value), quote=True)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


@dataclass
class DeviceSummary:
    device: str
    soc: str = ""
    arch: str = ""
    status: str = "completed"  # completed | quarantined | busy
    reason: str = ""
    counts: Counter = field(default_factory=Counter)


def summarize_devices(records: Sequence[TestRecord]) -> list[DeviceSummary]:
    out = []
    for device, recs in by_device(records).items():
        s = DeviceSummary(device, recs[0].soc_model, recs[0].htp_arch)
        s.counts = Counter(r.status for r in recs)
        lab = [r for r in recs if r.failure_class == FailureClass.QUARANTINED and r.status == "error"]
        if lab:
            s.status, s.reason = "quarantined", lab[0].message
        elif recs and all(r.status == "skipped" and r.failure_class == FailureClass.BUSY for r in recs):
            s.status, s.reason = "busy", recs[0].message
        out.append(s)
    return out


def _cell(recs: list[TestRecord]) -> str:
    total = len(recs)
    bad = [r for r in recs if r.status in ("failed", "error")]
    passed = sum(1 for r in recs if r.status == "passed")
    flaky = any(r.flaky for r in recs)
    if bad:
        kind, label = "fail", f"FAIL {len(bad)}/{total}"
        classes = sorted({r.failure_class or r.status for r in bad})
        label += f" ({', '.join(classes)})"
    elif passed:
        kind, label = ("flaky", f"PASS {passed}/{total}, flaky") if flaky else ("pass", f"PASS {passed}/{total}")
    else:
        kind, label = "skip", "SKIPPED"
    parts = [f'<span class="badge {kind}">{esc(label)}</span>']
    speeds = []
    for attr, name in (("decode_tps", "decode"), ("prefill_tps", "prefill")):
        vals = sorted(getattr(r, attr) for r in recs if getattr(r, attr) is not None)
        if vals:
            speeds.append(f"{name} {vals[len(vals) // 2]:.1f} tok/s")
    loads = [r.load_s for r in recs if r.load_s is not None]
    if loads:
        speeds.append(f"load {sorted(loads)[len(loads) // 2]:.2f} s")
    if speeds:
        parts.append(f'<div class="speed">{esc(" | ".join(speeds))}</div>')
    verdicts = sorted({r.verdict for r in recs if r.verdict})
    if verdicts:
        parts.append(f'<div class="speed">verdict: {esc(", ".join(verdicts))}</div>')
    tfs = [tf for r in recs if (tf := teacher_forced_of(r)) is not None]
    if tfs:
        flips = sum(int(tf.get("disagreements") or 0) for tf in tfs)
        steps = sum(int(tf.get("counted_steps") or 0) for tf in tfs)
        kls = sorted(tf["mean_kl"] for tf in tfs if tf.get("mean_kl") is not None and tf.get("kl_used"))
        kl = f", KL {kls[len(kls) // 2]:.3f}" if kls else ""
        worst = max((tf["verdict"] for tf in tfs), key=("agree", "drift", "disagree", "error").index)
        parts.append(f'<div class="speed tf-{esc(worst)}">teacher-forced: {esc(worst)} '
                     f"({flips}/{steps} steps differ{esc(kl)})</div>")
    sample = next((r for r in bad if r.text), None) or next((r for r in recs if r.text), None)
    if sample is not None:
        parts.append(f'<div class="text" title="{esc(_clip(sample.text, 2000))}">{esc(_clip(sample.text, TEXT_EXCERPT))}</div>')
    elif bad and bad[0].message:
        parts.append(f'<div class="text">{esc(_clip(bad[0].message, TEXT_EXCERPT))}</div>')
    return f'<td class="{kind}">{"".join(parts)}</td>'


def _matrix(device: str, recs: list[TestRecord]) -> list[str]:
    cells = [r for r in recs if r.backend_pair]
    other = [r for r in recs if not r.backend_pair]
    out = [f"<h3>{esc(device)}</h3>"]
    if cells:
        pairs = sorted({r.backend_pair for r in cells})
        rows = list(dict.fromkeys((r.suite, r.model) for r in cells))
        out.append(f'<table class="matrix" id="matrix-{esc(device)}"><thead><tr><th>suite</th><th>model</th>'
                   + "".join(f"<th>{esc(p)}</th>" for p in pairs) + "</tr></thead><tbody>")
        for suite, model in rows:
            line = [f"<tr><td>{esc(suite)}</td><td>{esc(model)}</td>"]
            for p in pairs:
                group = [r for r in cells if (r.suite, r.model, r.backend_pair) == (suite, model, p)]
                line.append(_cell(group) if group else '<td class="skip">-</td>')
            out.append("".join(line) + "</tr>")
        out.append("</tbody></table>")
    if other:
        out.append('<table class="other"><thead><tr><th>test</th><th>status</th><th>class</th><th>message</th>'
                   "</tr></thead><tbody>")
        for r in other:
            kind = {"passed": "pass", "skipped": "skip"}.get(r.status, "fail")
            out.append(f'<tr><td>{esc(r.name)}</td><td class="{kind}">{esc(r.status)}</td>'
                       f"<td>{esc(r.failure_class)}</td><td>{esc(_clip(r.message, 600))}</td></tr>")
        out.append("</tbody></table>")
    return out


def _departures(records: Sequence[TestRecord]) -> list[str]:
    """Where B departs from A: one row per teacher-forced comparison that found a disagreement."""
    rows = [(r, tf) for r in records if (tf := teacher_forced_of(r)) is not None
            and tf.get("first_disagreement") is not None]
    if not rows:
        return ["<p>No teacher-forced disagreement with the CPU reference.</p>"]
    out = ['<table class="departures"><thead><tr><th>device</th><th>test</th><th>verdict</th><th>step</th>'
           "<th>text around it (A's tokens, [the step])</th><th>rows</th></tr></thead><tbody>"]
    for r, tf in rows:
        ctx = tf.get("context") or {}
        around = (f"{esc(ctx.get('before', ''))}<mark>{esc(ctx.get('token', ''))}</mark>{esc(ctx.get('after', ''))}")
        near = tf.get("rows_near") or []
        table = "".join(
            f"<tr><td>{row['step']}</td><td>{row['tok_a']}</td><td>{row['tok_b']}</td>"
            f"<td>{'==' if row['agree'] else 'DIFF'}</td><td>{esc(row['max_abs_diff'])}</td><td>{esc(row['text'])}</td></tr>"
            for row in near)
        detail = (f"<details><summary>{len(near)} rows</summary><table><tr><th>step</th><th>A</th><th>B</th><th></th>"
                  f"<th>maxAbsDiff</th><th>text</th></tr>{table}</table></details>") if near else ""
        note = f'<div class="speed">{esc(tf["exclusion_note"])}</div>' if tf.get("exclusion_note") else ""
        out.append(f"<tr><td>{esc(r.device)}</td><td>{esc(r.name)}</td><td>{esc(tf['verdict'])}</td>"
                   f"<td>{esc(tf['first_disagreement'])}</td><td>{around}{note}</td><td>{detail}</td></tr>")
    out.append("</tbody></table>")
    return out


def group_failures(records: Iterable[TestRecord]) -> dict[str, list[TestRecord]]:
    """Failures by signature (the failure class when no signature matched), biggest group first."""
    groups: dict[str, list[TestRecord]] = {}
    for r in records:
        if r.status in ("failed", "error"):
            groups.setdefault(r.signature or f"class:{r.failure_class or r.status}", []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def _failures(records: Sequence[TestRecord]) -> list[str]:
    groups = group_failures(records)
    if not groups:
        return ["<p>No failures.</p>"]
    out = ['<table class="failures"><thead><tr><th>signature</th><th>class</th><th>count</th><th>devices</th>'
           "<th>tests</th><th>example</th></tr></thead><tbody>"]
    for sig, recs in groups.items():
        first = recs[0]
        devices = sorted({r.device for r in recs})
        tests = list(dict.fromkeys(f"{r.device}: {r.name}" for r in recs))
        shown = "<br>".join(esc(t) for t in tests[:8]) + (f"<br>... {len(tests) - 8} more" if len(tests) > 8 else "")
        example = esc(_clip(first.message, 800))
        if first.log_excerpt:
            example += f"<details><summary>log excerpt</summary><pre>{esc(_clip(first.log_excerpt, 8000))}</pre></details>"
        out.append(f"<tr><td>{esc(sig)}</td><td>{esc(first.failure_class or first.status)}</td><td>{len(recs)}</td>"
                   f"<td>{esc(', '.join(devices))}</td><td>{shown}</td><td>{example}</td></tr>")
    out.append("</tbody></table>")
    return out


def render_html(records: Sequence[TestRecord], *, title: str, regressions: Sequence[Regression] = (),
                plots: dict[str, str] | None = None, generated_at: float | None = None) -> str:
    """The report page. `plots`: device -> image path relative to the page."""
    records = list(records)
    counts = Counter(r.status for r in records)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(generated_at or time.time()))
    body = [f"<h1>{esc(title)}</h1>",
            f'<p class="meta">generated {esc(when)} &middot; {len(records)} results: '
            + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("passed", "failed", "error", "skipped")) + "</p>"]

    body.append("<h2>Devices</h2>")
    body.append('<table class="devices"><thead><tr><th>device</th><th>SoC</th><th>arch</th><th>status</th>'
                "<th>passed</th><th>failed</th><th>error</th><th>skipped</th><th>reason</th></tr></thead><tbody>")
    for s in summarize_devices(records):
        body.append(f"<tr><td>{esc(s.device)}</td><td>{esc(s.soc)}</td><td>{esc(s.arch)}</td>"
                    f'<td class="status-{esc(s.status)}">{esc(s.status)}</td>'
                    + "".join(f"<td>{s.counts.get(k, 0)}</td>" for k in ("passed", "failed", "error", "skipped"))
                    + f"<td>{esc(_clip(s.reason, 600))}</td></tr>")
    body.append("</tbody></table>")

    body.append("<h2>Regressions</h2>")
    if regressions:
        body.append("<ul>" + "".join(f'<li class="regression">{esc(r.describe())}</li>' for r in regressions) + "</ul>")
    else:
        body.append("<p>None against the recent nights.</p>")

    body.append("<h2>Backend matrix</h2>")
    for device, recs in by_device(records).items():
        body.extend(_matrix(device, recs))

    if any(teacher_forced_of(r) is not None for r in records):
        body.append('<h2 id="departures">Where each backend departs from the CPU reference (teacher-forced)</h2>')
        body.extend(_departures(records))

    body.append("<h2>Failures by signature</h2>")
    body.extend(_failures(records))

    if plots:
        body.append("<h2>Performance trends</h2>")
        for device, src in sorted(plots.items()):
            body.append(f'<h3>{esc(device)}</h3><img class="trend" src="{esc(src)}" alt="{esc(device)} speed trend">')

    css = _CSS.read_text(encoding="utf-8") if _CSS.is_file() else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{css}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_html(records: Sequence[TestRecord], out_dir: Path, *, title: str, history: History | None = None,
               regressions: Sequence[Regression] = (), nights: int = 30) -> Path:
    """out_dir/report.html, with trend PNGs in out_dir/plots/ when a history is given."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, str] = {}
    if history is not None:
        devices = list(by_device(records))
        for device, path in plot_trends(history, out_dir / "plots", devices, nights=nights).items():
            plots[device] = path.relative_to(out_dir).as_posix()
    page = render_html(records, title=title, regressions=regressions, plots=plots)
    path = out_dir / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
