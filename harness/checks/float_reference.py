"""A QNN program of a user's export against its own float model (docs/executorch-reference.md):
the export's `reference/` (the float model's teacher-forced logits over each prompt and its greedy
continuation) read and checked, and the program's logits over the same tokens judged against it
by the distributions, as the MNN lane judges (checks/teacher_forced.py's figures and export
verdict): mean KL(float || program), the share of steps whose argmax flips, the NLL gap on the
reference's tokens. Random-weight models have near-tied logits, so argmax alone is no judge.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.checks.teacher_forced import ExportFigures, PromptFigures, Thresholds, judge_prompt
from harness.errors import ArtifactError
from harness.evidence import Agreement, FloatReferenceAgreement, PromptAgreement

REFERENCE_DIR = "reference"
INDEX = "reference.json"
SCHEMA = "et-reference/1"


# The per-prompt lines only name a prompt gone wholly astray (flips and the NLL gap do not separate
# healthy from faulty programs at near ties); the cell's verdict is the budget's, on the medians.
PROMPT_LINES = Thresholds(drift_kl=math.inf, disagree_kl=math.inf, drift_nll_gap=0.5, disagree_nll_gap=1.0,
                          drift_rate=0.8, disagree_rate=0.9, export_drift_kl=math.inf, export_drift_nll_gap=math.inf,
                          export_drift_rate=math.inf)


@dataclass(frozen=True)
class QuantBudget:
    """What a quantization format may cost a model end to end: the median over the reference's
    prompts of the mean KL(float || program) and of the NLL gap (program - float) on the float
    model's tokens. A program over it with every op clean is `quant-budget`, not a fault
    (docs/executorch-reference.md#the-verdict)."""

    kl: float
    nll_gap: float

    def over(self, median_kl: float | None, median_nll_gap: float | None) -> tuple[str, ...]:
        """The figures over the budget, said with it; () when within."""
        said = []
        if median_kl is not None and median_kl > self.kl:
            said.append(f"median mean KL {median_kl:.4f} > budget {self.kl:g}")
        if median_nll_gap is not None and median_nll_gap > self.nll_gap:
            said.append(f"median NLL gap {median_nll_gap:.4f} > budget {self.nll_gap:g}")
        return tuple(said)


# Per quantization format, constant over depth (docs/executorch-reference.md#calibration): above
# SmolLM2-135M's trained weights truncated (16a4w KL 0.26 at 2 layers, 0.22 at 4; 16a8w 0.14, 8a8w
# 0.18 at 2), which did not grow from 2 to 4 layers, and 10x above random-weight decoders of 2-6
# layers (<= 0.034); a whole 24-36-layer model is extrapolated, not measured. A format not measured
# takes 16a4w's, the loosest.
DEFAULT_BUDGETS: Mapping[str, QuantBudget] = {
    "16a4w": QuantBudget(kl=0.4, nll_gap=0.25),
    "16a8w": QuantBudget(kl=0.25, nll_gap=0.2),
    "8a8w": QuantBudget(kl=0.25, nll_gap=0.2),
}
LOOSEST_FORMAT = "16a4w"
BUDGET_KEYS = ("kl", "nll_gap")


def quant_budget(fmt: str, budgets: Mapping[str, QuantBudget] | None = None) -> QuantBudget:
    """The budget of format `fmt`: the user's (a plan's `quant_budget`, --quant-budget), else the default."""
    given = budgets or {}
    return given.get(fmt) or DEFAULT_BUDGETS.get(fmt) or DEFAULT_BUDGETS[LOOSEST_FORMAT]


def parse_budgets(raw: object, where: str, formats: Collection[str]) -> dict[str, QuantBudget]:
    """{format: {kl: x, nll_gap: y}} (a plan's mapping or the option's), a key left out keeping the
    format's default; `formats`: the quant formats there are (harness.runners.QUANT_FORMATS).
    ValueError naming `where`.format.key and what to write."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping of format -> {{kl: ..., nll_gap: ...}}")
    out = {}
    for fmt, figures in raw.items():
        if fmt not in formats:
            raise ValueError(f"{where}.{fmt}: not a quantization format ({', '.join(formats)})")
        if not isinstance(figures, Mapping) or not figures:
            raise ValueError(f"{where}.{fmt}: expected {{kl: ..., nll_gap: ...}}")
        base = quant_budget(str(fmt))
        values = {"kl": base.kl, "nll_gap": base.nll_gap}
        for key, value in figures.items():
            if key not in BUDGET_KEYS:
                raise ValueError(f"{where}.{fmt}.{key}: not a budget figure ({', '.join(BUDGET_KEYS)})")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"{where}.{fmt}.{key}: {value!r} is not a positive number")
            values[str(key)] = float(value)
        out[str(fmt)] = QuantBudget(**values)
    return out


def parse_budget_option(texts: Sequence[str], formats: Collection[str],
                        option: str = "--quant-budget") -> dict[str, QuantBudget]:
    """`FORMAT:kl=X,nll_gap=Y` (repeatable) as parse_budgets reads a plan's mapping."""
    raw: dict[str, dict[str, object]] = {}
    for text in texts:
        fmt, sep, rest = text.partition(":")
        if not sep or not rest:
            raise ValueError(f"{option} {text!r}: write it as FORMAT:kl=X,nll_gap=Y (e.g. 16a4w:kl=0.1)")
        for pair in rest.split(","):
            key, eq, value = pair.partition("=")
            try:
                raw.setdefault(fmt.strip(), {})[key.strip()] = float(value) if eq else None
            except ValueError:
                raise ValueError(f"{option} {text!r}: {key.strip()}={value!r} is not a number") from None
    return parse_budgets(raw, option, formats)


@dataclass(frozen=True)
class ReferencePrompt:
    id: str
    text: str
    prompt_tokens: int
    tokens: tuple[int, ...]  # the prompt's ids, then the float model's greedy continuation
    logits: Path  # [len(tokens) - 1, V] float: row t is the float model's distribution for tokens[t + 1]


@dataclass(frozen=True)
class FloatReference:
    folder: Path
    prompts: tuple[ReferencePrompt, ...]

    @property
    def index(self) -> Path:
        return self.folder / INDEX

    def token_matrix(self) -> np.ndarray:
        """[P, L] int64: each prompt's tokens, -1 after its end (hostrt/executorch/forward.py's --tokens)."""
        width = max(len(p.tokens) for p in self.prompts)
        out = np.full((len(self.prompts), width), -1, dtype=np.int64)
        for i, p in enumerate(self.prompts):
            out[i, :len(p.tokens)] = p.tokens
        return out


def missing_float_reference(export: Path) -> str:
    return (f"{export}: no float reference ({REFERENCE_DIR}/{INDEX}): the QNN program cannot be judged against its own "
            f"float model; have the exporter write {REFERENCE_DIR}/ beside the .pte (docs/executorch-reference.md: "
            "the float model's teacher-forced logits and greedy tokens on the suite's prompts)")


def _bad(path: Path, problem: str) -> ArtifactError:
    return ArtifactError(f"{path}: {problem}; re-run the exporter so it writes {REFERENCE_DIR}/ "
                         "as docs/executorch-reference.md lays it out")


def _prompt(folder: Path, index: Path, i: int, raw: object) -> ReferencePrompt:
    if not isinstance(raw, dict):
        raise _bad(index, f"prompts[{i}] is not an object")
    tokens, name = raw.get("tokens"), raw.get("logits")
    if not isinstance(tokens, list) or len(tokens) < 2 or not all(isinstance(t, int) and t >= 0 for t in tokens):
        raise _bad(index, f"prompts[{i}].tokens is not a list of at least 2 token ids")
    if not isinstance(name, str) or "/" in name or not (folder / name).is_file():
        raise _bad(index, f"prompts[{i}].logits names no .npy file in {folder}")
    return ReferencePrompt(str(raw.get("id") or f"p{i}"), str(raw.get("text") or ""),
                           int(raw.get("prompt_tokens") or 0), tuple(tokens), folder / name)


def reference_folder(export: Path) -> Path:
    """The export's reference/, or the one laid beside it (`<model dir>/reference/`: a plan build's
    `reference:` that the harness built, shared by every format folder of the model dir)."""
    own = export / REFERENCE_DIR
    beside = export.parent / REFERENCE_DIR
    return beside if not (own / INDEX).is_file() and (beside / INDEX).is_file() else own


def read_float_reference(export: Path) -> FloatReference | None:
    """The export's reference/, None when it has none; ArtifactError naming the file and key when
    it is there but unusable."""
    folder = reference_folder(export)
    index = folder / INDEX
    if not index.is_file():
        return None
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _bad(index, f"not readable as JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise _bad(index, f"schema is {data.get('schema') if isinstance(data, dict) else None!r}, not {SCHEMA!r}")
    prompts = data.get("prompts")
    if not isinstance(prompts, list) or not prompts:
        raise _bad(index, "prompts is not a non-empty list")
    return FloatReference(folder, tuple(_prompt(folder, index, i, p) for i, p in enumerate(prompts)))


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    out: np.ndarray = x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
    return out


def compare_prompt(ref: np.ndarray, prog: np.ndarray, tokens: Sequence[int], *, prompt: str,
                   thresholds: Thresholds = PROMPT_LINES) -> PromptFigures:
    """One prompt's per-step comparison: mean KL(float || program), flips, NLL gap program - float."""
    steps = len(tokens) - 1
    if ref.shape[0] != steps or prog.shape[0] < steps or ref.shape[-1] != prog.shape[-1]:
        return PromptFigures(prompt, "error", None, None, 0, 0)
    prog = prog[:steps]
    if not np.isfinite(prog).all():
        return PromptFigures(prompt, "disagree", math.inf, math.inf, steps, steps)
    lr, lp = _log_softmax(ref), _log_softmax(prog)
    kl = float(np.mean(np.sum(np.exp(lr) * (lr - lp), axis=-1)))
    nxt = np.asarray(tokens[1:], dtype=np.int64)[:, None]
    gap = float(np.mean(-np.take_along_axis(lp, nxt, -1)) - np.mean(-np.take_along_axis(lr, nxt, -1)))
    flips = int(np.sum(ref.argmax(-1) != prog.argmax(-1)))
    verdict = judge_prompt(kl, gap, flips, steps, thresholds=thresholds).verdict
    return PromptFigures(prompt, verdict, kl, gap, flips, steps)


def judge_float_reference(reference: FloatReference, program: np.ndarray, *, label: str,
                          budget: QuantBudget | None = None) -> FloatReferenceAgreement:
    """`program` ([P, L-1, V], hostrt/executorch/forward.py's teacher-forced output) against `reference`,
    on the budget of its quantization format `label` unless `budget` is given: `agree` (within it),
    `over-budget`, `disagree` (non-finite logits: astray whatever the ops say) or `error` (nothing compared)."""
    budget = budget or quant_budget(label)
    figures = []
    for i, p in enumerate(reference.prompts):
        prog = program[i] if program.ndim == 3 and i < program.shape[0] else np.empty((0, 0))
        figures.append(compare_prompt(np.load(p.logits), prog, p.tokens, prompt=p.id))
    fig = ExportFigures.of(figures)
    errors = fig.verdicts.get("error", 0)
    notes = (f"{errors} of {fig.prompts} comparisons failed",) if errors else ()
    if not fig.compared:
        verdict, reasons = "error", (f"no prompt was compared ({errors} of {fig.prompts} comparisons failed)",)
    elif any(p.mean_kl is not None and not math.isfinite(p.mean_kl) for p in figures):
        verdict, reasons = "disagree", ("the program's logits are not finite", *notes)
    else:
        over = budget.over(fig.median_kl, fig.median_nll_gap)
        verdict, reasons = ("over-budget" if over else "agree"), (*over, *notes)
    # Rounded as the record's JSON keeps them: the evidence reads back equal.
    return FloatReferenceAgreement(
        str(reference.index), Agreement(verdict), _r(fig.median_kl), _r(fig.worst_kl), _r(fig.median_flip_share),
        _r(fig.worst_flip_share), _r(fig.median_nll_gap), _r(fig.worst_nll_gap), reasons,
        tuple(PromptAgreement(p.prompt, p.verdict, _r(p.mean_kl), _r(p.nll_gap), p.flips, p.counted) for p in figures),
        budget_kl=budget.kl, budget_nll_gap=budget.nll_gap)


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 6)


__all__ = ["DEFAULT_BUDGETS", "FloatReference", "QuantBudget", "ReferencePrompt", "compare_prompt",
           "judge_float_reference", "missing_float_reference", "parse_budget_option", "parse_budgets", "quant_budget",
           "read_float_reference"]
