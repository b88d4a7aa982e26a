"""A static HTML report for one night, from its records (and the history for trends).

Sections: devices (status, quarantine reasons), regressions, each export's verdict per device
(one line per instrument: static quant, teacher-forced per pair, text coherence), the backend matrix per
device (verdict, where it ran: tier, QAIRT, placement (report/where_ran.py), speed, teacher-forced
agreement, an excerpt of the generated text), where
each backend departs from the CPU reference (teacher-forced: the first disagreeing step, the
text around it and the rows near it), where it departs per device and model (report/departs.py: the
ExecuTorch lane's first op under the threshold with a plot of SQNR per op, the MNN lane's wrong
quantization range and first disagreeing step), failures grouped by signature, QNN profiles from ETDumps
(cycles, labelled "emulator" when measured there: report/qnn_profile.py), and trend plots.

The markup is templates/report.html.j2; this module only prepares the data. Jinja2's
autoescape escapes every value (model output can hold anything, markup included) and the
environment's `finalize` makes control characters visible first. One self-contained file
plus plots/*.png.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, Template
from markupsafe import Markup

from harness.evidence import Row, Tone
from harness.hostfiles import write_atomic
from harness.outcomes import FailureClass, NightOutcome, Status
from harness.report.departs import where_it_departs
from harness.report.exports import export_verdicts, is_export_verdict
from harness.report.history import History, Regression
from harness.report.junit import xml_safe
from harness.report.op_plots import plot_night_ops
from harness.report.plots import plot_trends
from harness.report.qnn_profile import qnn_profiles
from harness.report.records import TestRecord, by_device
from harness.report.teacher_forced import TeacherForcedCell, any_teacher_forced, departures, teacher_forced_cell
from harness.report.where_ran import TierBadge, WhereRan, timing_label, where_ran

_CSS = Path(__file__).with_name("style.css")
TEXT_EXCERPT = 240
FAILURE_TESTS_SHOWN = 8


def _visible(value: object) -> object:
    """Every printed value, before autoescape: control characters made visible (NUL, ESC, ...)."""
    return value if isinstance(value, Markup) else xml_safe(value)


@lru_cache(maxsize=1)
def page_template() -> Template:
    """The page's template, compiled once per process (0.5-1.2 s of a loaded 2-core host: a
    night's stop waited for it, docs/lab-scale.md); the night compiles it while devices work."""
    env = Environment(loader=PackageLoader("harness.report", "templates"), autoescape=True,
                      finalize=_visible, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    return env.get_template("report.html.j2")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _median(values: Iterable[float]) -> float | None:
    vals = sorted(values)
    return vals[len(vals) // 2] if vals else None


@dataclass
class DeviceSummary:
    device: str
    soc: str = ""
    arch: str = ""
    status: NightOutcome = NightOutcome.COMPLETED  # also the CSS class
    reason: str = ""
    counts: Counter[Status] = field(default_factory=Counter)
    tiers: tuple[TierBadge, ...] = ()  # what its records ran on (npu, emulator, cpu)


def summarize_devices(records: Sequence[TestRecord]) -> list[DeviceSummary]:
    out = []
    for device, recs in by_device(records).items():
        s = DeviceSummary(device, recs[0].soc_model, recs[0].htp_arch, tiers=where_ran(recs).tiers)
        s.counts = Counter(r.status for r in recs)
        lab = [r for r in recs if r.failure_class is FailureClass.QUARANTINED and r.status is Status.ERROR]
        if lab:
            s.status, s.reason = NightOutcome.QUARANTINED, lab[0].message
        elif recs and all(r.status is Status.SKIPPED and r.failure_class is FailureClass.BUSY for r in recs):
            s.status, s.reason = NightOutcome.BUSY, recs[0].message
        out.append(s)
    return out


@dataclass
class Cell:
    """One (suite, model, backend pair) cell of a device's matrix."""

    kind: str  # pass | flaky | fail | skip: the CSS class
    label: str
    speed: str = ""
    verdicts: str = ""
    teacher_forced: TeacherForcedCell | None = None
    text: str = ""  # an excerpt of the generated text (a text the checks judged)
    text_title: str | None = None  # the longer text on hover
    where: WhereRan | None = None  # tier, QAIRT and placement (report/where_ran.py)
    reasons: list[Row] = field(default_factory=list)  # why it failed, first: class and message, first departure
    rows: list[Row] = field(default_factory=list)  # what its records' evidence says (harness.evidence rows())
    output: str = ""  # the tail of what its program printed (collapsed): never the reason


def reason_rows(recs: Sequence[TestRecord]) -> list[Row]:
    """A failed cell's reasons: each failed record's class and message (once each), then each family's
    line that explains a failure (the figures against their line, the first departure)."""
    out = [Row(r.cause, _clip(r.message, TEXT_EXCERPT * 2), Tone.FAIL, first=True) for r in recs if r.is_bad]
    said = " ".join(r.message for r in recs if r.is_bad)
    out += [row for r in recs for ev in r.evidence for row in ev.rows() if row.first and row.text[:60] not in said]
    return list(dict.fromkeys(out))


def evidence_rows(recs: Sequence[TestRecord]) -> list[Row]:
    """Every family's lines over a cell's records (harness.evidence: each family says its own), once each."""
    return list(dict.fromkeys(row for r in recs for ev in r.evidence for row in ev.rows() if not row.first))


def _cell(recs: list[TestRecord]) -> Cell:
    total = len(recs)
    bad = [r for r in recs if r.is_bad]
    passed = sum(1 for r in recs if r.status is Status.PASSED)
    if bad:
        classes = sorted({r.cause for r in bad})
        cell = Cell("fail", f"FAIL {len(bad)}/{total} ({', '.join(classes)})")
    elif passed:
        flaky = any(r.flaky for r in recs)
        cell = Cell("flaky", f"PASS {passed}/{total}, flaky") if flaky else Cell("pass", f"PASS {passed}/{total}")
    else:
        cell = Cell("skip", "SKIPPED")
    speeds = []
    # emulator timings are not device speed: said beside every figure
    emulated = " (emulator)" if any(timing_label(r) for r in recs) else ""
    for attr, name in (("decode_tps", "decode"), ("prefill_tps", "prefill")):
        tps = _median(getattr(r, attr) for r in recs if getattr(r, attr) is not None)
        if tps is not None:
            speeds.append(f"{name} {tps:.1f} tok/s{emulated}")
    load = _median(r.load_s for r in recs if r.load_s is not None)
    if load is not None:
        speeds.append(f"load {load:.2f} s{emulated}")
    cell.speed = " | ".join(speeds)
    cell.where = where_ran([r for r in recs if r.status is not Status.SKIPPED])  # a skip ran nowhere
    cell.verdicts = ", ".join(sorted({r.verdict for r in recs if r.verdict}))
    cell.teacher_forced = teacher_forced_cell(recs)
    cell.reasons = reason_rows(recs) if bad else []
    cell.rows = evidence_rows(recs)
    # A text the checks judged (a coherence verdict) is the cell's to show; anything else a program
    # printed (a runner's stderr, a lowering's log) is its output, collapsed under the reasons.
    judged = next((r for r in bad if r.text and r.verdict), None) or next((r for r in recs if r.text and r.verdict), None)
    if judged is not None:
        cell.text, cell.text_title = _clip(judged.text, TEXT_EXCERPT), _clip(judged.text, 2000)
    else:
        printed = next((r for r in bad if r.text), None) or next((r for r in recs if r.text), None)
        cell.output = _clip(printed.text[-2000:], 2000) if printed is not None else ""
    return cell


@dataclass
class MatrixRow:
    suite: str
    model: str
    cells: list[Cell | None]  # per pair of the device's matrix; None: not run


@dataclass
class OtherResult:
    """A record outside the matrix (no backend pair): a lab or suite-level test."""

    name: str
    kind: str
    status: str
    failure_class: str | None
    message: str
    rows: list[Row] = field(default_factory=list)


# A record's status as the page's CSS class.
_KIND = {Status.PASSED: "pass", Status.SKIPPED: "skip"}


@dataclass
class DeviceMatrix:
    device: str
    pairs: list[str]
    rows: list[MatrixRow]
    other: list[OtherResult]
    not_shown: str = ""  # the pairs nothing ran on anywhere tonight, and why (a skip's reason)


def ran_pairs(records: Sequence[TestRecord]) -> set[str]:
    """The pairs (an ExecuTorch export's formats) something ran on or failed at tonight, on any
    device: a column where every record everywhere was skipped is a format no export had."""
    return {r.backend_pair.name for r in records if r.backend_pair is not None and r.status is not Status.SKIPPED}


def _matrix(device: str, recs: list[TestRecord], shown: set[str]) -> DeviceMatrix:
    cells = [r for r in recs if r.backend_pair is not None]
    every = sorted({r.backend_pair for r in cells if r.backend_pair is not None}, key=str)
    pairs = [p for p in every if p.name in shown]
    hidden = [p for p in every if p.name not in shown]
    rows = []
    for suite, model in dict.fromkeys((r.suite, r.model) for r in cells if r.backend_pair in pairs):
        groups = [[r for r in cells if (r.suite, r.model, r.backend_pair) == (suite, model, p)] for p in pairs]
        rows.append(MatrixRow(suite, model, [_cell(g) if g else None for g in groups]))
    other = [OtherResult(r.name, _KIND.get(r.status, "fail"), r.status.value,
                         r.failure_class.value if r.failure_class else None, _clip(r.message, 600), evidence_rows([r]))
             for r in recs if not r.backend_pair and not is_export_verdict(r)]
    why = next((r.message for r in cells if r.backend_pair in hidden and r.message), "")
    not_shown = (f"not shown: {', '.join(p.name for p in hidden)}, nothing ran there tonight"
                 + (f" (e.g. {_clip(why, 200)})" if why else "")) if hidden else ""
    return DeviceMatrix(device, [p.name for p in pairs], rows, other, not_shown)


def _test_of(rec: TestRecord) -> str:
    """The check a testcase name is of: `test_localize` of `emu::test_localize[16a8w]`."""
    return rec.name.split("[", 1)[0].rsplit("::", 1)[-1]


def group_failures(records: Iterable[TestRecord]) -> dict[str, list[TestRecord]]:
    """Failures by signature (the failure class when no signature matched) and check, biggest group
    first: a fault's disagreement, a healthy program's drift and a localization stay apart (a
    signature met in several checks is named with its check: `class:disagree (test_localize)`)."""
    groups: dict[tuple[str, str], list[TestRecord]] = {}
    for r in records:
        if r.is_bad:
            groups.setdefault((r.signature or f"class:{r.cause}", _test_of(r)), []).append(r)
    shared = {sig for sig, _ in groups if sum(s == sig for s, _ in groups) > 1}
    named = {(f"{sig} ({test})" if sig in shared else sig): recs for (sig, test), recs in groups.items()}
    return dict(sorted(named.items(), key=lambda kv: (-len(kv[1]), kv[0])))


@dataclass
class FailureGroup:
    signature: str
    failure_class: str
    count: int
    devices: str
    tests: list[str]  # the first FAILURE_TESTS_SHOWN "device: test"
    more: int  # how many tests are not listed
    message: str
    log_excerpt: str
    reasons: list[Row] = field(default_factory=list)  # the first record's explaining lines (figures, departure)


def _failures(records: Sequence[TestRecord]) -> list[FailureGroup]:
    out = []
    for sig, recs in group_failures(records).items():
        first = recs[0]
        tests = list(dict.fromkeys(f"{r.device}: {r.name}" for r in recs))
        out.append(FailureGroup(sig, first.cause, len(recs),
                                ", ".join(sorted({r.device for r in recs})), tests[:FAILURE_TESTS_SHOWN],
                                max(0, len(tests) - FAILURE_TESTS_SHOWN), _clip(first.message, 800),
                                _clip(first.log_excerpt, 8000) if first.log_excerpt else "",
                                [row for row in reason_rows([first]) if row.label != first.cause]))
    return out


def render_html(records: Sequence[TestRecord], *, title: str, regressions: Sequence[Regression] = (),
                plots: dict[str, str] | None = None, generated_at: float | None = None,
                op_plots: dict[str, str] | None = None) -> str:
    """The report page. `plots`: device -> image path relative to the page; `op_plots`: "device:
    program" -> its per-op cycles plot against the last good night (report/op_plots.py)."""
    records = list(records)
    counts = Counter(r.status for r in records)
    shown = ran_pairs(records)  # once: per device it was devices x records at a 1 000-device stop
    template = page_template()
    return template.render(
        title=title,
        generated=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(generated_at or time.time())),
        total=len(records),
        counts=[(counts.get(s, 0), s.value) for s in Status],
        statuses=[s.value for s in Status],
        devices=[replace(s, reason=_clip(s.reason, 600)) for s in summarize_devices(records)],
        regressions=[r.describe() for r in regressions],
        matrices=[_matrix(device, recs, shown) for device, recs in by_device(records).items()],
        exports=export_verdicts(records),
        teacher_forced=any_teacher_forced(records),
        departures=departures(records),
        where_it_departs=where_it_departs(records),
        failures=_failures(records),
        qnn_profiles=qnn_profiles(records),
        plots=sorted((plots or {}).items()),
        op_plots=sorted((op_plots or {}).items()),
        # Our own stylesheet, shipped with the package: trusted markup, not escaped.
        css=Markup(_CSS.read_text(encoding="utf-8") if _CSS.is_file() else ""),
    )


def write_html(records: Sequence[TestRecord], out_dir: Path, *, title: str, history: History | None = None,
               regressions: Sequence[Regression] = (), nights: int = 30, night_id: str | None = None) -> Path:
    """out_dir/report.html, with trend PNGs in out_dir/plots/ when a history is given, and the
    per-op cycles of `night_id` (stored in it) against the last good night."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, str] = {}
    op_plots: dict[str, str] = {}
    if history is not None:
        devices = list(by_device(records))
        for device, path in plot_trends(history, out_dir / "plots", devices, nights=nights).items():
            plots[device] = path.relative_to(out_dir).as_posix()
        if night_id is not None:
            op_plots = {k: p.relative_to(out_dir).as_posix()
                        for k, p in plot_night_ops(history, night_id, out_dir / "plots").items()}
    page = render_html(records, title=title, regressions=regressions, plots=plots, op_plots=op_plots)
    path = out_dir / "report.html"
    return write_atomic(path, page)
