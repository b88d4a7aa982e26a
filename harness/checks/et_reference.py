"""An ExecuTorch run against the CPU reference of the same model
(docs/executorch-runner.md#judging-a-qnn-run-against-its-reference):

* a program's forward output against its fake-quant reference (the quantized graph run in
  eager PyTorch on the CPU): cosine similarity and the share of positions whose argmax agrees;
* an LLM run's greedy tokens against eager greedy tokens of the same model: how many of the
  reference tokens the runner's text reproduces, in order, from the first.

Thresholds are the measured spread of real QNN runs on QAIRT's HTP emulator, with margin:
16a4w gives cos 0.9999997 / argmax 100 %, 8a8w cos 0.991 / 87.5 % (SM8650), 8a8w on v68
cos 0.99986 / 96.9 %; a wrong input, wrong program or broken kernel gives cos near 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Thresholds:
    min_cosine: float = 0.98
    min_argmax_share: float = 0.80
    min_token_share: float = 0.75  # of the reference's greedy tokens reproduced from the first


@dataclass(frozen=True)
class OutputMatch:
    cosine: float
    argmax_share: float
    max_abs: float
    shape: tuple[int, ...]
    passed: bool
    problem: str = ""

    def describe(self) -> str:
        return (f"cos {self.cosine:.7f}, argmax {self.argmax_share:.1%} agree, max |diff| {self.max_abs:.4g} "
                f"over {list(self.shape)}") + (f": {self.problem}" if self.problem else "")

    def to_json(self) -> dict[str, object]:
        return {"cosine": round(self.cosine, 7), "argmax_share": round(self.argmax_share, 4),
                "max_abs": round(self.max_abs, 6), "shape": list(self.shape), "passed": self.passed}


def compare_outputs(out: np.ndarray, ref: np.ndarray, limits: Thresholds = Thresholds()) -> OutputMatch:
    """`out` against `ref` (same shape; the last axis is the one argmax runs over)."""
    if out.shape != ref.shape:
        return OutputMatch(0.0, 0.0, float("inf"), tuple(out.shape), False,
                           f"output shape {list(out.shape)} is not the reference's {list(ref.shape)}")
    a, b = out.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    cosine = float(a @ b / norm) if norm > 0 else 0.0
    share = float(np.mean(out.argmax(-1) == ref.argmax(-1))) if out.ndim else 1.0
    max_abs = float(np.max(np.abs(a - b))) if a.size else 0.0
    problems = []
    if not np.isfinite(a).all():
        problems.append("the output holds NaN or Inf")
    if cosine < limits.min_cosine:
        problems.append(f"cosine {cosine:.4f} below {limits.min_cosine}")
    if share < limits.min_argmax_share:
        problems.append(f"argmax agreement {share:.1%} below {limits.min_argmax_share:.0%}")
    return OutputMatch(cosine, share, max_abs, tuple(out.shape), not problems, "; ".join(problems))


@dataclass(frozen=True)
class GreedyReference:
    """Eager greedy tokens of the model for one prompt (`*.greedy_ref.json`: prompt, prompt_ids,
    max_new_tokens and the token lists per reference, e.g. fp32 and fakequant)."""

    prompt: str
    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    tokens: Mapping[str, tuple[int, ...]]

    @classmethod
    def read(cls, path: Path) -> GreedyReference:
        data = json.loads(path.read_text(encoding="utf-8"))
        tokens = {k: tuple(int(t) for t in v) for k, v in data.items()
                  if isinstance(v, list) and k not in ("prompt_ids",)}
        return cls(str(data["prompt"]), tuple(int(t) for t in data["prompt_ids"]),
                   int(data.get("max_new_tokens") or max(len(v) for v in tokens.values())), tokens)

    @property
    def seq_len(self) -> int:
        return len(self.prompt_ids) + self.max_new_tokens


@dataclass(frozen=True)
class TokenMatch:
    reference: str  # which token list (fakequant, fp32)
    agreed: int  # reference tokens reproduced in order from the first
    total: int
    first_difference: int | None  # index of the first token not reproduced
    passed: bool

    def describe(self) -> str:
        where = "" if self.first_difference is None else f", first difference at token {self.first_difference}"
        return f"greedy tokens {self.agreed}/{self.total} equal to the {self.reference} reference{where}"

    def to_json(self) -> dict[str, object]:
        return {"reference": self.reference, "agreed": self.agreed, "total": self.total,
                "first_difference": self.first_difference, "passed": self.passed}


def vocab_pieces(tokenizer_json: Path) -> dict[int, str]:
    """Token id -> its text, from an HF tokenizer.json's model vocab and added tokens."""
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    pieces = {int(i): str(p) for p, i in (data.get("model", {}).get("vocab") or {}).items()}
    pieces.update({int(t["id"]): str(t["content"]) for t in data.get("added_tokens") or []})
    return pieces


def match_tokens(generated: str, ref: Sequence[int], pieces: Mapping[int, str], *, reference: str,
                 limits: Thresholds = Thresholds()) -> TokenMatch:
    """How many of `ref`'s tokens the runner's generated text (the prompt removed) reproduces
    from its start: each reference token's text must come next."""
    pos, agreed = 0, 0
    for tok in ref:
        piece = pieces.get(tok)
        if piece is None or not generated.startswith(piece, pos):
            break
        pos += len(piece)
        agreed += 1
    total = len(ref)
    first = None if agreed == total else agreed
    return TokenMatch(reference, agreed, total, first, total > 0 and agreed >= limits.min_token_share * total)


def generated_after(text: str, prompt: str) -> str | None:
    """What the runner printed after the echoed prompt (None when the prompt is not there)."""
    at = text.find(prompt)
    return None if at < 0 else text[at + len(prompt):].split("\n", 1)[0]


__all__ = ["GreedyReference", "OutputMatch", "Thresholds", "TokenMatch", "compare_outputs", "generated_after",
           "match_tokens", "vocab_pieces"]
