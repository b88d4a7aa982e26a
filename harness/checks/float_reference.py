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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.checks.teacher_forced import ExportTeacherForced, PromptFigures, Thresholds, judge_export, judge_prompt
from harness.errors import ArtifactError
from harness.evidence import Agreement, FloatReferenceAgreement, PromptAgreement

REFERENCE_DIR = "reference"
INDEX = "reference.json"
SCHEMA = "et-reference/1"


def _lines(drift_kl: float, disagree_kl: float) -> Thresholds:
    # Flips and the NLL gap do not separate healthy from faulty programs at near ties (healthy
    # flips up to 48 % of a prompt's steps, NLL gap up to 0.06; the faults overlap both): their lines only
    # catch a program gone wholly astray. The KL lines are the same per prompt and on the medians.
    return Thresholds(drift_kl=drift_kl, disagree_kl=disagree_kl, drift_nll_gap=0.15, disagree_nll_gap=0.5,
                      drift_rate=0.6, disagree_rate=0.8, export_drift_kl=drift_kl, export_drift_nll_gap=0.15,
                      export_drift_rate=0.6)


# Per quantization format, on the median over prompts of the mean KL(float || program); calibrated
# after the example's causal-mask fix on 21 real lowerings on QAIRT's HTP emulator
# (benchmarks/et_reference_calibration.py, docs/executorch-reference.md#calibration: random-weight
# SwiGLU decoders 2x64 and 4x128 for SM8650, 3x96 for SM8750, healthy and with the seed's MUL-range
# fault planted at their last layer, 3x96's at its first too). The drift line sits near the middle
# between the format's healthy band and its faults' (16a4w: healthy <= 0.0136, faults >= 0.0232;
# 16a8w and 8a8w: healthy <= 0.0096, faults >= 0.0204); disagree at twice it. A format not measured
# takes 16a4w's, the loosest.
FLOAT_REFERENCE_THRESHOLDS: Mapping[str, Thresholds] = {
    "16a4w": _lines(0.018, 0.036),
    "16a8w": _lines(0.014, 0.028),
    "8a8w": _lines(0.014, 0.028),
}
LOOSEST_FORMAT = "16a4w"


def float_reference_thresholds(fmt: str) -> Thresholds:
    """The lines for a program of quantization format `fmt` (16a8w, ...)."""
    return FLOAT_REFERENCE_THRESHOLDS.get(fmt, FLOAT_REFERENCE_THRESHOLDS[LOOSEST_FORMAT])


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
                   thresholds: Thresholds) -> PromptFigures:
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
                          thresholds: Thresholds | None = None) -> FloatReferenceAgreement:
    """`program` ([P, L-1, V], hostrt/executorch/forward.py's teacher-forced output) against `reference`;
    `label` is the program's quantization format, whose lines judge it unless `thresholds` are given."""
    if thresholds is None:
        thresholds = float_reference_thresholds(label)
    figures = []
    for i, p in enumerate(reference.prompts):
        prog = program[i] if program.ndim == 3 and i < program.shape[0] else np.empty((0, 0))
        figures.append(compare_prompt(np.load(p.logits), prog, p.tokens, prompt=p.id, thresholds=thresholds))
    verdict: ExportTeacherForced = judge_export(figures, pair=label, thresholds=thresholds)
    fig = verdict.figures
    # Rounded as the record's JSON keeps them: the evidence reads back equal.
    return FloatReferenceAgreement(
        str(reference.index), Agreement(verdict.verdict), _r(fig.median_kl), _r(fig.worst_kl), _r(fig.median_flip_share),
        _r(fig.worst_flip_share), _r(fig.median_nll_gap), _r(fig.worst_nll_gap), verdict.reasons,
        tuple(PromptAgreement(p.prompt, p.verdict, _r(p.mean_kl), _r(p.nll_gap), p.flips, p.counted) for p in figures))


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 6)


__all__ = ["FLOAT_REFERENCE_THRESHOLDS", "FloatReference", "ReferencePrompt", "compare_prompt", "float_reference_thresholds",
           "judge_float_reference",
           "missing_float_reference", "read_float_reference"]
