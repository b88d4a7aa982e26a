"""Judge a captured runtime log's `[POSDBG]` dumps: pass, fail, or unchecked (the dump cannot
decide), with the findings. The one entry the suites, the lab (through harness.pipeline) and
`python -m harness.checks.mrope STDOUT [--json]` share, so they give the same verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.checks.mrope.anchor import reference_from_first_chunk
from harness.checks.mrope.calls import split_runs, warmup_count
from harness.checks.mrope.posdbg import PosDump, parse_posdbg
from harness.checks.mrope.positions import (
    MALFORMED_DUMP,
    NO_DUMPS,
    NO_REFERENCE,
    UNCHECKED_KINDS,
    check_run,
    position_finding,
)
from harness.checks.mrope.reference import Image, Positions
from harness.errors import HarnessError
from harness.findings import Finding

PASS, FAIL, UNCHECKED = "pass", "fail", "unchecked"


@dataclass
class PositionVerdict:
    verdict: str  # "pass" | "fail" | "unchecked"
    findings: list[Finding] = field(default_factory=list)
    runs: int = 0  # prompt runs in the dump
    warmup_lines: int = 0  # start-up tuning lines before the first prompt (not a prompt)
    reference: str = ""  # where the reference came from

    def to_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "runs": self.runs,
            "warmup_lines": self.warmup_lines,
            "reference": self.reference,
            "findings": [_finding_dict(f) for f in self.findings],
        }

    def explain(self) -> str:
        head = (f"mRoPE positions: {self.verdict} ({self.runs} prompt run(s), {self.warmup_lines} warm-up "
                f"line(s) skipped; reference {self.reference or 'none'})")
        return "\n".join([head] + ["  " + f.explain() for f in self.findings])


def _finding_dict(f: Finding) -> dict[str, object]:
    """A finding as the CLI's JSON has held it: kind, message, explain, where, expected/got, hint."""
    out: dict[str, object] = {"kind": f.kind.value, "message": f.message, "explain": f.explain(with_hint=False)}
    where = f.where.to_json()
    out.update({k: where[k] for k in ("run", "chunk", "decode_step", "all_seq_len", "seq_len", "axis", "index",
                                      "line_no") if k in where})
    for key, value in (("expected", f.expected), ("got", f.found)):
        if value is not None:
            out[key] = list(value) if isinstance(value, tuple) else value
    if f.hint:
        out["hint"] = f.hint
    return out


def _decide(findings: Sequence[Finding]) -> str:
    if any(f.kind not in UNCHECKED_KINDS for f in findings):
        return FAIL
    return UNCHECKED if findings else PASS


def judge_dumps(dumps: Sequence[PosDump], *, log: str = "", images: Sequence[Image] | None = None,
                prompt_len: int | None = None, reference: Positions | None = None) -> PositionVerdict:
    """Verdict over parsed dumps. `reference`: the prompt's positions when a tokenizer gave them;
    else each run's own first prefill call anchors it (`images`: the grids when known, None =
    read them from the dump; `prompt_len`: the run's prompt tokens, else listSize)."""
    runs = split_runs(dumps)
    warm = warmup_count(dumps)
    if not runs:
        f = position_finding(NO_DUMPS, "no [POSDBG] line of a prompt in the log"
                            + (f" ({warm} start-up warm-up line(s) only)" if warm else ""))
        return PositionVerdict(UNCHECKED, [f], 0, warm)
    findings: list[Finding] = []
    source = "given" if reference is not None else "the first prefill call"
    for i, run in enumerate(runs):
        ref = reference if reference is not None else reference_from_first_chunk(
            run, images, prompt_len=prompt_len if len(runs) == 1 else None)
        found = check_run(i, run, ref, log if len(runs) == 1 else "",
                          prompt_len=prompt_len if len(runs) == 1 else None)
        findings.extend(found)
        if ref is None and not found:
            findings.append(position_finding(
                NO_REFERENCE, "the first prefill call cannot anchor a reference (summary form, or an "
                "image whose pad tokens do not start inside the first call), and the row counts "
                "show no fault", run=i))
    return PositionVerdict(_decide(findings), findings, len(runs), warm, source)


def judge_log(text: str, *, images: Sequence[Image] | None = None, prompt_len: int | None = None,
              reference: Positions | None = None) -> PositionVerdict:
    """Verdict over a log's text (an `llm_demo` stdout, with logcat when it went there). A
    malformed `[POSDBG]` line is a failure naming the line."""
    try:
        dumps = parse_posdbg(text)
    except HarnessError as exc:
        return PositionVerdict(FAIL, [position_finding(MALFORMED_DUMP, str(exc))])
    return judge_dumps(dumps, log=text, images=images, prompt_len=prompt_len, reference=reference)
