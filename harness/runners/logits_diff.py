"""Teacher-forced logits comparison with MNN's `llm_logits_diff`: run it on a device, parse
every row and both summary lines, and give a verdict (docs/logits-diff.md).

    llm_logits_diff configA.json configB.json prompt.txt [max_tokens]

A's greedy token drives both models, so every step compares the logits of A and B for the
same history. The row and summary formats, what the real binary printed on this machine, and
where each threshold comes from are written down in docs/logits-diff.md.

Verdict (`judge`): `agree`, `drift` or `disagree` from the argmax agreement of the counted
steps, the mean KL(A||B) and the NLL gap (B - A); `error` when no step was compared, B's
forward returned nothing, the summary is missing or the tool failed. Step 0 is not counted
when the prompt is longer than either config's prefill chunk: `forward(ids)` then returns
other logits than the last prompt token's (observed with the real binary; generation is
unaffected), and the mean KL/NLL, which include step 0, are then not used for the verdict.

CLI: `python -m harness.runners.logits_diff STDOUT [--stderr F] [--exit-code N] [--json]
[--chunk-a N --chunk-b N]`; with --json one object: steps, disagreements, first_disagreement
(null when none), mean_kl, nll_a, nll_b, worst_max_abs_diff, verdict, reasons, ...
"""

from __future__ import annotations

import argparse
import json
import math
import posixpath
import re
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from collections.abc import Mapping, Sequence

from harness.errors import HarnessError, TransportError
from harness.provision.types import ProvisionedModel, ProvisionedRuntime
from harness.runners.diff_tools import TOOL, pick_tool, without_engine_text
from harness.runners.overlay import Overlay, read_remote_config, write_overlay
from harness.runners.prompts import Prompt, images_of, render_prompt_file
from harness.transport.base import Transport

PROMPT_FILE = "prompt.txt"
Verdict = Literal["agree", "drift", "disagree", "error"]
VERDICTS: tuple[str, ...] = ("agree", "drift", "disagree", "error")

# printf formats of llm_logits_diff.cpp (MNN master 4d40bdbd, docs/logits-diff.md):
#   "%4d | %6d %6d %s | %7.4f %7.4f | %9.5f %11.7f | %s"
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+|nan|inf|infinity)(?:[eE][-+]?\d+)?"
_ROW = re.compile(rf"^\s*(\d+) \|\s*(-?\d+)\s+(-?\d+)\s+(==|DIFF) \|\s*({_NUM})\s+({_NUM}) \|"
                  rf"\s*({_NUM})\s+({_NUM}) \|(?: (.*))?$", re.I)
_HEADER = re.compile(r"^step \| tokA\(argmaxA\) tokB\(argmaxB\) agree \|")
_PROMPT = re.compile(r"^prompt tokens: (\d+), max new tokens: (\d+)")
_SUMMARY = re.compile(rf"^summary: argmax disagreements=(\d+), first at step (-?\d+), worst maxAbsDiff=({_NUM})",
                      re.I)
_DIST = re.compile(rf"^distribution: mean KL\(A\|\|B\)=({_NUM}), teacher-forced mean NLL A=({_NUM}) "
                   rf"B=({_NUM})", re.I)
_STOP = re.compile(r"^stop token at step (\d+)")
# Lines that mean B (or A) gave no usable logits at a step: the comparison stopped there.
_TOOL_ERROR = re.compile(r"^(?:forward returned null|invalid vocab dim -?\d+|readMap returned null) at step (\d+)")
_FATAL = re.compile(r"^(?:Usage: |Invalid max_tokens|Failed to open prompt file|load failed|\[Error\]: )")


def _float(text: str) -> float:
    t = text.strip().lower()
    if t.lstrip("+-") == "nan":
        return math.nan
    return float(t)


@dataclass(frozen=True)
class Step:
    index: int
    tok_a: int  # A's argmax (the token that drives both models)
    tok_b: int  # B's argmax
    agree: bool
    margin_a: float  # top-1 minus top-2 logit of A
    margin_b: float
    max_abs_diff: float
    mean_abs_diff: float
    text: str  # A's token as text

    def to_json(self) -> dict[str, Any]:
        return {"step": self.index, "tok_a": self.tok_a, "tok_b": self.tok_b, "agree": self.agree,
                "margin_a": _num(self.margin_a), "margin_b": _num(self.margin_b),
                "max_abs_diff": _num(self.max_abs_diff), "mean_abs_diff": _num(self.mean_abs_diff),
                "text": self.text}


@dataclass
class ParsedDiff:
    steps: list[Step] = field(default_factory=list)
    prompt_tokens: int | None = None
    max_new_tokens: int | None = None
    disagreements: int | None = None  # as the summary line says (all steps, step 0 included)
    first_at: int | None = None  # summary's "first at step" (-1 = none)
    worst_max_abs_diff: float | None = None
    mean_kl: float | None = None
    nll_a: float | None = None
    nll_b: float | None = None
    stop_step: int | None = None
    tool_errors: list[str] = field(default_factory=list)  # forward returned null at step N, ...
    fatal: list[str] = field(default_factory=list)  # usage / load errors
    has_header: bool = False

    @property
    def has_summary(self) -> bool:
        return self.disagreements is not None

    @property
    def has_distribution(self) -> bool:
        return self.mean_kl is not None


def parse(stdout: str) -> ParsedDiff:
    """Every row, both summary lines and the tool's error lines of one captured run.
    A row's text may itself hold a newline: lines that are no known line continue it."""
    out = ParsedDiff()
    pending: list[str] = []

    def flush_pending(final: bool) -> None:
        nonlocal pending
        lines = pending
        if final and lines and lines[-1] == "":
            lines = lines[:-1]  # the blank line the tool prints before the summary
        if out.steps and lines:
            last = out.steps[-1]
            out.steps[-1] = Step(last.index, last.tok_a, last.tok_b, last.agree, last.margin_a, last.margin_b,
                                 last.max_abs_diff, last.mean_abs_diff, "\n".join([last.text, *lines]))
        pending = []

    in_rows = False
    for raw in stdout.splitlines():
        if (line := without_engine_text(raw)) is None:
            continue
        if m := _ROW.match(line):
            flush_pending(False)
            out.steps.append(Step(int(m[1]), int(m[2]), int(m[3]), m[4] == "==", _float(m[5]), _float(m[6]),
                                  _float(m[7]), _float(m[8]), m[9] or ""))
            in_rows = True
            continue
        known = True
        if m := _PROMPT.match(line):
            out.prompt_tokens, out.max_new_tokens = int(m[1]), int(m[2])
        elif _HEADER.match(line):
            out.has_header = True
        elif m := _SUMMARY.match(line):
            out.disagreements, out.first_at, out.worst_max_abs_diff = int(m[1]), int(m[2]), _float(m[3])
        elif m := _DIST.match(line):
            out.mean_kl, out.nll_a, out.nll_b = _float(m[1]), _float(m[2]), _float(m[3])
        elif m := _STOP.match(line):
            out.stop_step = int(m[1])
        elif _TOOL_ERROR.match(line):
            out.tool_errors.append(line.strip())
        elif _FATAL.match(line):
            out.fatal.append(line.strip())
        else:
            known = False
        if known:
            flush_pending(True)
            in_rows = in_rows and not line.startswith(("summary:", "distribution:"))
        elif in_rows:
            pending.append(line)
    flush_pending(True)
    return out


# ---- verdict ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Thresholds:
    """Calibrated on the real binary (docs/logits-diff.md, "Thresholds").

    Real runs (SmolLM2-135M, 2-core x86_64): identical configs KL 0, gap 0; a second CPU
    session with other kernels ("differs a little") KL 0.013-0.017, |gap| <= 0.045, no flip;
    one-token prefill chunks KL 0.054-0.151, gap up to 0.46, 0-1 flips; corrupted weights
    KL 8.44, gap 10.2, every step flipped. The virtual saturation scenario is scripted at
    KL ~3, gap ~2.5, ~80 % flips."""

    drift_kl: float = 0.05  # 3x the healthy maximum (0.017)
    disagree_kl: float = 1.0  # far above every drift sample (0.151), far below corruption (8.44)
    drift_nll_gap: float = 0.2  # 4x the healthy maximum (0.045)
    disagree_nll_gap: float = 1.0
    disagree_rate: float = 0.5  # share of counted steps whose argmax differs


DEFAULT_THRESHOLDS = Thresholds()


@dataclass
class DiffResult:
    """One comparison of B against A and its verdict."""

    parsed: ParsedDiff
    verdict: Verdict
    reasons: list[str]
    excluded_steps: tuple[int, ...] = ()
    exclusion_note: str = ""
    counted_steps: int = 0
    counted_disagreements: int = 0
    first_disagreement: int | None = None  # first counted step whose argmax differs
    kl_used: bool = True  # False: the mean KL/NLL include a step that is not counted
    chunk_a: int | None = None
    chunk_b: int | None = None
    exit_code: int | None = 0
    stderr: str = ""
    stdout: str = ""
    label_a: str = "A"
    label_b: str = "B"
    wall_s: float = 0.0
    transport_error: str | None = None  # the link failed: the comparison may not have run

    @property
    def steps(self) -> list[Step]:
        return self.parsed.steps

    @property
    def nll_gap(self) -> float | None:
        p = self.parsed
        return p.nll_b - p.nll_a if p.nll_a is not None and p.nll_b is not None else None

    def context(self, width: int = 6) -> tuple[str, str, str] | None:
        """A's text before the first disagreeing step, that step's token, and what follows."""
        if self.first_disagreement is None:
            return None
        steps = self.parsed.steps
        i = next(k for k, s in enumerate(steps) if s.index == self.first_disagreement)
        return ("".join(s.text for s in steps[max(0, i - width):i]), steps[i].text,
                "".join(s.text for s in steps[i + 1:i + 1 + width]))

    def describe(self) -> str:
        p = self.parsed
        head = (f"teacher-forced {self.label_b} vs {self.label_a}: {self.verdict} "
                f"({self.counted_disagreements}/{self.counted_steps} steps disagree")
        if p.mean_kl is not None:
            head += f", mean KL {p.mean_kl:.4f}, NLL {p.nll_a:.4f} -> {p.nll_b:.4f}"
        lines = [head + ")"]
        lines += [f"  {r}" for r in self.reasons]
        ctx = self.context()
        if ctx is not None:
            s = next(s for s in p.steps if s.index == self.first_disagreement)
            lines.append(f"  first disagreement at step {s.index}: {ctx[0]!r} [{ctx[1]!r}] {ctx[2]!r} "
                         f"(A token {s.tok_a}, B argmax {s.tok_b}, maxAbsDiff {s.max_abs_diff:.3f})")
        if self.exclusion_note:
            lines.append(f"  note: {self.exclusion_note}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        p = self.parsed
        ctx = self.context()
        return {
            "verdict": self.verdict, "reasons": self.reasons,
            "steps": len(p.steps), "counted_steps": self.counted_steps,
            "disagreements": self.counted_disagreements,
            "summary_disagreements": p.disagreements,
            "first_disagreement": self.first_disagreement,
            "context": None if ctx is None else {"before": ctx[0], "token": ctx[1], "after": ctx[2]},
            "mean_kl": _num(p.mean_kl), "nll_a": _num(p.nll_a), "nll_b": _num(p.nll_b),
            "nll_gap": _num(self.nll_gap), "kl_used": self.kl_used,
            "worst_max_abs_diff": _num(p.worst_max_abs_diff),
            "excluded_steps": list(self.excluded_steps), "exclusion_note": self.exclusion_note or None,
            "chunk_a": self.chunk_a, "chunk_b": self.chunk_b,
            "prompt_tokens": p.prompt_tokens, "stop_step": p.stop_step,
            "tool_errors": p.tool_errors + p.fatal, "exit_code": self.exit_code,
            "transport_error": self.transport_error,
            "rows": [s.to_json() for s in p.steps],
        }

    def record_extras(self) -> dict[str, Any]:
        """The compact form a TestRecord carries (the rows stay in the run folder / JSON)."""
        d = self.to_json()
        d.pop("rows")
        d["a"], d["b"] = self.label_a, self.label_b
        # Where B departs from A: the rows around the first disagreement, for the HTML report.
        if self.first_disagreement is not None:
            i = next(k for k, s in enumerate(self.parsed.steps) if s.index == self.first_disagreement)
            d["rows_near"] = [s.to_json() for s in self.parsed.steps[max(0, i - 3):i + 4]]
        return d


def _num(x: float | None) -> float | None:
    return round(x, 6) if isinstance(x, (int, float)) and math.isfinite(x) else None


def chunk_of(config: Mapping[str, Any]) -> int | None:
    """The prefill chunk a config runs with: the largest of `chunk_limits` (QNN configs carry
    [chunk, 1]); None = one forward for the whole prompt."""
    cl = config.get("chunk_limits")
    if isinstance(cl, list) and cl and all(isinstance(x, int) and x > 0 for x in cl):
        return max(cl)
    return None


def judge(parsed: ParsedDiff, *, chunk_a: int | None = None, chunk_b: int | None = None,
          exit_code: int | None = 0, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> DiffResult:
    """Verdict of one parsed run. `chunk_a`/`chunk_b`: each config's prefill chunk (None = unchunked)."""
    t = thresholds
    reasons: list[str] = []
    excluded: tuple[int, ...] = ()
    note = ""
    chunks = [c for c in (chunk_a, chunk_b) if c]
    if parsed.prompt_tokens is not None and chunks and parsed.prompt_tokens > min(chunks):
        excluded = (0,)
        note = (f"step 0 not counted: the prompt ({parsed.prompt_tokens} tokens) is longer than a prefill chunk "
                f"(A {chunk_a or 'unchunked'}, B {chunk_b or 'unchunked'}), and MNN's forward() then returns "
                "other logits than the last prompt token's (generation is unaffected); the mean KL/NLL include "
                "that step")
    counted = [s for s in parsed.steps if s.index not in excluded]
    flips = [s for s in counted if not s.agree]
    result = DiffResult(parsed, "error", reasons, excluded, note, len(counted), len(flips),
                        flips[0].index if flips else None, chunk_a=chunk_a, chunk_b=chunk_b, exit_code=exit_code)
    # Mean KL/NLL cover every step; with step 0 excluded they are usable only when every
    # counted step is bit-identical (KL 0, equal NLL there).
    identical_rest = bool(counted) and all(s.max_abs_diff == 0 and s.agree for s in counted)
    result.kl_used = not excluded

    errors = list(parsed.fatal) + list(parsed.tool_errors)
    if errors:
        reasons.append("the tool reported: " + "; ".join(errors[:3]))
    if exit_code not in (0, None):
        reasons.append(f"{TOOL} exited with code {exit_code}")
    if not parsed.steps:
        reasons.append("no step was compared" + ("" if parsed.has_header else " (no row table printed)"))
    elif not counted:
        reasons.append(f"no step left to compare after excluding step(s) {list(excluded)}")
    if not parsed.has_summary:
        reasons.append("no `summary:` line (the run did not finish)")
    elif not parsed.has_distribution:
        reasons.append("no `distribution:` line")
    if reasons:
        return result  # error

    kl = parsed.mean_kl if result.kl_used else (0.0 if identical_rest else None)
    gap = result.nll_gap if result.kl_used else (0.0 if identical_rest else None)
    rate = len(flips) / len(counted)
    disagree, drift = [], []
    if rate >= t.disagree_rate:
        disagree.append(f"argmax differs at {len(flips)} of {len(counted)} steps ({rate:.0%} >= {t.disagree_rate:.0%})")
    elif flips:
        drift.append(f"argmax differs at {len(flips)} of {len(counted)} steps (first at step {flips[0].index})")
    for value, name, lo, hi in ((kl, "mean KL(A||B)", t.drift_kl, t.disagree_kl),
                                (gap, "NLL gap B-A", t.drift_nll_gap, t.disagree_nll_gap)):
        if value is None or not math.isfinite(value):
            if value is not None:
                disagree.append(f"{name} is {value}")
            continue
        if value >= hi:
            disagree.append(f"{name} {value:.4f} >= {hi}")
        elif value >= lo:
            drift.append(f"{name} {value:.4f} >= {lo}")
    if not result.kl_used and not identical_rest:
        reasons.append("mean KL and NLL not used (they include the uncounted step 0); verdict from argmax agreement")
    if disagree:
        result.verdict = "disagree"
        reasons[:0] = disagree + drift
    elif drift:
        result.verdict = "drift"
        reasons[:0] = drift
    else:
        result.verdict = "agree"
    return result


def analyse(stdout: str, stderr: str = "", *, exit_code: int | None = 0, chunk_a: int | None = None,
            chunk_b: int | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> DiffResult:
    """Parse and judge one captured run (what the CLI and the device runner both use).
    stderr is searched too: MNN_ERROR lines land there on some builds."""
    parsed = parse(stdout)
    for line in stderr.splitlines():
        if _TOOL_ERROR.match(line):
            parsed.tool_errors.append(line.strip())
        elif _FATAL.match(line):
            parsed.fatal.append(line.strip())
    res = judge(parsed, chunk_a=chunk_a, chunk_b=chunk_b, exit_code=exit_code, thresholds=thresholds)
    res.stdout, res.stderr = stdout, stderr
    return res


# ---- running on a device ----------------------------------------------------------------------
@dataclass
class LogitsDiffRunner:
    """Runs `llm_logits_diff` from a provisioned runtime (it sits beside llm_demo: provisioning
    pushes every file at the top of the runtime folder) on two configs of a provisioned model.
    Never raises for a failing run: the result's verdict is `error` with the reason."""

    transport: Transport
    runtime: ProvisionedRuntime
    model: ProvisionedModel
    keep_run_dirs: bool = False
    tool_name: str = TOOL  # or TOOL_VL (diff_tools.py), whose B sees the images

    @property
    def tool(self) -> str:
        return posixpath.join(self.runtime.remote_dir, self.tool_name)

    @classmethod
    def if_available(cls, transport: Transport, runtime: ProvisionedRuntime,
                     model: ProvisionedModel) -> LogitsDiffRunner | None:
        """A runner when the pushed runtime holds llm_logits_diff(_vl), the VL build first."""
        name = pick_tool(transport, runtime.remote_dir) if model.kind == "mnn" else None
        return cls(transport, runtime, model, tool_name=name) if name is not None else None

    def _config(self, backend: str, overlay: Overlay) -> tuple[str, int | None]:
        name = self.model.configs.get(backend, backend if backend.endswith(".json") else None)
        if name is None:
            have = ", ".join(sorted(self.model.configs)) or "none"
            raise HarnessError(f"{self.model.device}: model {self.model.remote_dir} has no config for backend "
                               f"{backend!r} (have: {have})")
        path = write_overlay(self.transport, self.model.remote_dir, name, overlay)
        return path, chunk_of(read_remote_config(self.transport, path))

    def run(self, prompt: Prompt | str, *, a: str, b: str, max_tokens: int = 32,
            overlay_a: Overlay | None = None, overlay_b: Overlay | None = None, timeout: float = 600.0,
            extra_env: Mapping[str, str] | None = None,
            thresholds: Thresholds = DEFAULT_THRESHOLDS) -> DiffResult:
        item = Prompt.of(prompt)
        render_prompt_file([item])  # bad prompts fail before touching the device
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise HarnessError(f"{TOOL}: max_tokens must be a positive integer, got {max_tokens!r}")
        run_dir = posixpath.join(self.transport.device.work_dir, "runs",
                                 time.strftime("%Y%m%d-%H%M%S") + "-diff-" + uuid.uuid4().hex[:8])
        started = time.monotonic()
        try:
            cfg_a, chunk_a = self._config(a, overlay_a or Overlay(greedy=True))
            cfg_b, chunk_b = self._config(b, overlay_b or Overlay(greedy=True))
            self._stage(item, run_dir)
            argv = [self.tool, cfg_a, cfg_b, PROMPT_FILE, str(max_tokens)]
            env = {**self.runtime.env(), **(dict(extra_env) if extra_env else {})}
            # cwd = the run folder: the tool writes tmp_diff_a/ and tmp_diff_b/ there.
            res = self.transport.shell(argv, timeout=timeout, cwd=run_dir, env=env)
        except TransportError as exc:
            out = analyse("", "", exit_code=None)
            out.reasons.append(f"transport failure: {exc}")
            out.transport_error = str(exc)
            out.label_a, out.label_b, out.wall_s = a, b, time.monotonic() - started
            return out
        exit_code = None if res.timed_out else res.exit_code
        out = analyse(res.stdout, res.stderr, exit_code=exit_code, chunk_a=chunk_a, chunk_b=chunk_b,
                      thresholds=thresholds)
        if res.timed_out:
            out.verdict = "error"
            out.reasons.append(f"{TOOL} timed out after {timeout:.0f} s")
        out.label_a, out.label_b, out.wall_s = a, b, time.monotonic() - started
        if out.verdict != "error" and not self.keep_run_dirs:
            try:
                self.transport.remove(run_dir, recursive=True)
            except (TransportError, HarnessError):
                pass  # a leftover folder is harmless
        return out

    def _stage(self, prompt: Prompt, run_dir: str) -> None:
        self.transport.makedirs(run_dir)
        with tempfile.TemporaryDirectory(prefix="harness-diff-") as tmp:
            local = Path(tmp) / PROMPT_FILE
            local.write_text(render_prompt_file([prompt]), encoding="utf-8")
            self.transport.push(local, posixpath.join(run_dir, PROMPT_FILE), mode=0o644)
        for name, path in images_of([prompt]).items():
            self.transport.push(path, posixpath.join(run_dir, name), mode=0o644)


# ---- CLI ----------------------------------------------------------------------------------------
def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise HarnessError(f"cannot read {what} file {path}: {exc.strerror}; pass an existing file") from None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m harness.runners.logits_diff",
        description=f"Parse a captured {TOOL} run and give the teacher-forced verdict "
                    "(agree, drift, disagree; error when no step was compared).")
    ap.add_argument("stdout", help=f"file with {TOOL}'s stdout")
    ap.add_argument("--stderr", help="file with its stderr")
    ap.add_argument("--exit-code", type=int, default=0, help="the tool's exit code")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a text report")
    ap.add_argument("--chunk-a", type=int, help="config A's prefill chunk (chunk_limits[0]); omit when unchunked")
    ap.add_argument("--chunk-b", type=int, help="config B's prefill chunk")
    args = ap.parse_args(argv)
    try:
        stdout = _read(args.stdout, "stdout")
        stderr = _read(args.stderr, "stderr") if args.stderr else ""
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    res = analyse(stdout, stderr, exit_code=args.exit_code, chunk_a=args.chunk_a, chunk_b=args.chunk_b)
    if args.json:
        print(json.dumps(res.to_json(), ensure_ascii=False, allow_nan=False))
    else:
        print(res.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
