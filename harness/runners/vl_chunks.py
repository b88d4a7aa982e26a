"""The CPU pair of a VL export run with the compiled chunk and with chunkings that pad and do
not pad, for the positions and shape checks (docs/posdbg.md#chunked-prefill).

The QNN graphs exist only for the compiled chunk, but the CPU backend runs any chunk: running
the CPU pair with `chunk_limits [C, 1]` shows chunked-prefill faults (positions, DeepStack rows)
on any device. A chunking whose last block is padded and one that is not tell a padding fault
from a positions fault. The prompt length is only known after a first, one-chunk run.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.checks import mrope
from harness.checks.shapes import scan_log_for_shape_errors
from harness.errors import HarnessError, TransportError
from harness.findings import Finding
from harness.pairs import BackendPair
from harness.runners.cases import PromptCase
from harness.runners.llm_demo import LlmDemoResult, LlmDemoRunner
from harness.runners.logits_diff import chunk_of
from harness.runners.overlay import Overlay, read_remote_config

DEFAULT_CHUNK = 128  # MNN's QNN export default (docs/posdbg.md#chunked-prefill)
# The chunkings a VL export's CPU pair runs, by role; `one` first gives the prompt length;
# `image-split` ends the first chunk inside the first image (a large image under the compiled
# chunk does that on a device; docs/posdbg.md#row-inflation).
ROLES = ("one", "compiled", "padding", "no-padding", "image-split")
# The harness turns the instrumented runtimes' dump on for its runs; other builds ignore it.
POSDBG_ENV = {"MNN_POSDBG": "full"}


@dataclass(frozen=True)
class Chunking:
    role: str  # one of ROLES
    limits: tuple[int, ...] | None  # None: the config's own (one forward for the prompt)
    pads: bool  # the last block is padded

    @property
    def label(self) -> str:
        cl = "config's own" if self.limits is None else f"chunk_limits {list(self.limits)}"
        return f"{self.role} ({cl}{', padded' if self.pads else ''})"


def pads(n: int, chunk: int) -> bool:
    """Does `[chunk, 1]` pad the last block of an n-token prompt? A remainder of 0 or 1 row
    needs none (1 fits the entry 1)."""
    return n % chunk > 1


def _splits_image(n: int, chunk: int, images: Sequence[tuple[int, int]]) -> bool:
    return any(s < b <= e for b in range(chunk, n, chunk) for s, e in images)


def chunkings(n: int, compiled: int, images: Sequence[tuple[int, int]] = ()) -> list[Chunking]:
    """The chunkings for an n-token prompt: the compiled chunk, plus one that pads and one that
    does not, whichever the compiled chunk is not. Those keep chunk boundaries out of the image
    blocks (`images`: (vision_start, vision_end) token indexes), so only padding tells them
    apart; `image-split` puts the first boundary in the middle of the first image. A role no
    chunk size fills is left out."""
    out = [Chunking("compiled", (compiled, 1), pads(n, compiled))]
    if n <= 2:
        return out
    fits = [c for c in range(min(n - 1, max(compiled, n // 2)), 1, -1) if not _splits_image(n, c, images)]
    if pads(n, compiled):
        other = next((c for c in fits if not pads(n, c) and c != compiled), None)
        if other is not None:
            out.append(Chunking("no-padding", (other, 1), False))
    else:
        other = next((c for c in fits if c < compiled and pads(n, c)), None)
        if other is not None:
            out.append(Chunking("padding", (other, 1), True))
    if images:
        start, end = images[0]
        split = start + 1 + (end - start) // 2
        if 2 <= split < n:
            out.append(Chunking("image-split", (split, 1), pads(n, split)))
    return out


def compiled_chunk(runner: LlmDemoRunner) -> int:
    """The export's compiled prefill chunk: the largest `chunk_limits` of its configs (QNN
    configs carry [chunk, 1]), else DEFAULT_CHUNK."""
    found = []
    for name in runner.model.configs.values():
        try:
            found.append(chunk_of(read_remote_config(runner.transport, posixpath.join(runner.model.remote_dir, name))))
        except (HarnessError, TransportError):
            continue
    return max((c for c in found if c), default=DEFAULT_CHUNK)


@dataclass
class ChunkedRun:
    """One prompt on the CPU pair under one chunking, judged."""

    case_id: str
    chunking: Chunking
    result: LlmDemoResult
    positions: mrope.PositionVerdict
    shape_findings: list[Finding] = field(default_factory=list)
    prompt_tokens: int | None = None


def _judge(case: PromptCase, chunking: Chunking, result: LlmDemoResult, pair: BackendPair) -> ChunkedRun:
    proc = result.runs[0]
    n = proc.parsed.summary.prompt_tokens if proc.parsed.summary is not None else None
    log = f"{proc.stdout}\n{proc.logcat or ''}"
    verdict = mrope.judge_log(log, images=image_grids(case), prompt_len=n)
    shapes = scan_log_for_shape_errors(f"{proc.stdout}\n{proc.stderr}\n{proc.logcat or ''}",
                                       source=f"llm_demo {pair} {chunking.label}")
    return ChunkedRun(case.id, chunking, result, verdict, shapes, n)


def image_grids(case: PromptCase) -> list[mrope.Image] | None:
    """The LLM grids of a prompt's images when every image has a forced size, else None (then
    the dump's own first call gives them)."""
    sizes = [(i.height, i.width) for i in case.prompt.images]
    known = [(h, w) for h, w in sizes if h is not None and w is not None]
    if len(known) != len(sizes):
        return None
    return [mrope.image_llm_grid(h, w) for h, w in known]


def run_chunkings(runner: LlmDemoRunner, cases: Sequence[PromptCase], pair: BackendPair, *, compiled: int | None = None,
                  max_new_tokens: int = 8, timeout: float = 300.0,
                  extra_env: Mapping[str, str] | None = None) -> list[ChunkedRun]:
    """Every case once in one chunk, then under each chunking of `chunkings` (greedy, the dump
    on). One llm_demo process per (case, chunking). Never raises for a failing run."""
    env = {**POSDBG_ENV, **(dict(extra_env) if extra_env else {})}
    chunk = compiled or compiled_chunk(runner)
    out: list[ChunkedRun] = []
    for case in cases:
        one = Chunking("one", None, False)
        first = _judge(case, one, runner.run([case.prompt], backend=pair, overlay=Overlay(
            max_new_tokens=max_new_tokens), timeout=timeout, extra_env=env), pair)
        out.append(first)
        n = first.prompt_tokens
        if n is None:
            continue  # the one-chunk run failed: nothing to size the chunkings by
        try:
            dumps = mrope.parse_posdbg(first.result.runs[0].stdout)
        except HarnessError:
            dumps = []  # the one-chunk run's verdict already names the malformed line
        ref = mrope.reference_from_first_chunk(dumps, image_grids(case), prompt_len=n)
        spans = mrope.image_spans(ref) if ref is not None else []
        for c in chunkings(n, chunk, spans):
            res = runner.run([case.prompt], backend=pair, overlay=Overlay(max_new_tokens=max_new_tokens,
                             chunk_limits=c.limits), timeout=timeout, extra_env=env)
            out.append(_judge(case, c, res, pair))
    return out


@dataclass(frozen=True)
class RoleVerdict:
    """What one chunking role's runs say for a check: `skip` (with the reason) when no run of
    the role exists or every dump was undecidable; else the failures, one line each."""

    skip: str = ""
    failures: tuple[str, ...] = ()


def _of_role(runs: Sequence[ChunkedRun], role: str) -> list[ChunkedRun]:
    return [r for r in runs if r.chunking.role == role]


def positions_verdict(runs: Sequence[ChunkedRun], role: str) -> RoleVerdict:
    """The positions check over a role's runs; one failure line per finding, naming its prompt,
    chunking and the finding as `[kind] ...`."""
    mine = _of_role(runs, role)
    if not mine:
        return RoleVerdict(skip=f"no {role} chunking for these prompts (see harness/runners/vl_chunks.py chunkings)")
    decided = [r for r in mine if r.positions.verdict != "unchecked"]
    if not decided:
        why = "; ".join(f"{r.case_id} {r.chunking.label}: {r.positions.findings[0].message}"
                        for r in mine if r.positions.findings)
        return RoleVerdict(skip=f"the [POSDBG] dump cannot decide ({why or 'no dump'})")
    fails = tuple(f"{r.case_id} {r.chunking.label}: {f.explain(with_hint=False)}"
                  for r in decided if r.positions.verdict == "fail" for f in r.positions.findings)
    return RoleVerdict(failures=fails)


def shapes_verdict(runs: Sequence[ChunkedRun], role: str) -> RoleVerdict:
    """The runtime shape guards over a role's runs (errors only)."""
    mine = _of_role(runs, role)
    if not mine:
        return RoleVerdict(skip=f"no {role} chunking for these prompts (see harness/runners/vl_chunks.py chunkings)")
    fails = tuple(f"{r.case_id} {r.chunking.label}: {f.explain()}"
                  for r in mine for f in r.shape_findings if f.is_error)
    return RoleVerdict(failures=fails)
