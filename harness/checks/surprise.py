"""How surprising each token of an answer is to a reference model (the same export on the host).

`Scorer(config).score(prompt, text)` runs the PyPI `mnn` engine (`MNN.llm`, the optional
`harness[mnn]` extra) teacher-forced: the chat-templated prompt, then the answer's tokens one
by one, and keeps for every token its negative log-likelihood and its *gap*: how far below the
reference's own best choice it is, `log p(best) - log p(token)` in nats.

Why the gap and not the NLL: the healthy export's sampler (config.json: `min_p` 0.05, top-k
40, top-p 0.9) never emits a token with p < 0.05 * p(best), so no healthy answer, greedy or
sampled, holds a gap above log(20) = 3.0 nats except where re-tokenizing the text splits a
word differently from how it was generated. A device whose MLP saturates writes tokens the
reference finds far less likely ("A plane's to stay", "photosyntze"). Loops are not
surprising at all (the reference loops too): this is one signal among the coherence rules,
never a verdict on its own (coherence.judge takes it as an optional input).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError


class ReferenceUnavailable(HarnessError):
    """The reference model cannot score: no `mnn` package or the export did not load."""


@dataclass(frozen=True)
class Surprise:
    """Per-token scores of one answer under the reference model."""

    tokens: list[str] = field(default_factory=list)
    nll: list[float] = field(default_factory=list)   # -log p(token), nats
    gap: list[float] = field(default_factory=list)   # log p(best) - log p(token), nats

    def surprising(self, at: float) -> list[tuple[int, str, float]]:
        """(position, token, gap) of every token whose gap reaches `at` nats."""
        return [(i, t, g) for i, (t, g) in enumerate(zip(self.tokens, self.gap)) if g >= at]

    def to_json(self) -> dict[str, object]:
        return {"tokens": self.tokens, "nll": self.nll, "gap": self.gap}

    def to_sparse(self, at: float = 2.0) -> dict[str, object]:
        """Compact form for fixtures: the token count and only the tokens with gap >= `at`."""
        return {"n": len(self.tokens), "over": [[i, t, round(g, 1)] for i, t, g in self.surprising(at)]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Surprise:
        """Full form (`tokens`, `gap`, optional `nll`) or sparse form (`n`, `over`)."""
        try:
            if "over" in obj:
                n = int(obj["n"])
                tokens, gap = [""] * n, [0.0] * n
                for i, tok, g in obj["over"]:
                    tokens[int(i)], gap[int(i)] = str(tok), float(g)
                return cls(tokens, [], gap)
            tokens, gap = list(obj["tokens"]), [float(x) for x in obj["gap"]]
            if len(tokens) != len(gap):
                raise ValueError("'tokens' and 'gap' differ in length")
            return cls(tokens, [float(x) for x in obj.get("nll", [])], gap)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise HarnessError(f"surprise scores need 'tokens' and 'gap' lists, or 'n' and 'over' "
                               f"([position, token, gap] rows): {exc}") from None


class Scorer:
    """One loaded reference engine; `score` may be called for many answers."""

    def __init__(self, config: str | Path) -> None:
        try:
            import MNN.llm as mnn_llm  # noqa: PLC0415 - optional extra, imported only when used
            import numpy  # noqa: PLC0415
        except ImportError as exc:
            raise ReferenceUnavailable(f"reference scoring needs the `mnn` package "
                                       f"(pip install 'harness[mnn]'): {exc}") from None
        if not Path(config).is_file():
            raise ReferenceUnavailable(f"{config}: no such config; give the export's config.json")
        self._np = numpy
        self._llm = mnn_llm.create(str(config))
        # The Python wrapper's load() drops the C object's answer: ask the C object itself.
        if not self._llm._c_obj.load():
            raise ReferenceUnavailable(f"{config}: the MNN engine could not load this export "
                                       "(its [Error] line says which file)")

    def _step(self, logits: Any, token: int) -> tuple[float, float]:
        v = self._np.asarray(logits.read(), dtype=self._np.float64).reshape(-1)
        top = float(v.max())
        lse = top + math.log(float(self._np.exp(v - top).sum()))
        return lse - float(v[token]), top - float(v[token])

    def _piece(self, token: int) -> str:
        # A token may hold part of a multi-byte character (Hebrew, Greek...): shown by its id.
        try:
            return str(self._llm.tokenizer_decode(token))
        except UnicodeDecodeError:
            return f"<token {token}>"

    def score(self, prompt: str, text: str) -> Surprise:
        """Teacher-forced scores of `text` as the answer to `prompt` (a final "\\n" = EOS, dropped)."""
        body = text[:-1] if text.endswith("\n") else text
        self._llm.reset()
        ids = self._llm.tokenizer_encode(self._llm.apply_chat_template(prompt))
        answer = self._llm.tokenizer_encode(body) if body else []
        tokens, nll, gap = [], [], []
        logits = self._llm.forward(ids)
        for k, tok in enumerate(answer):
            n, g = self._step(logits, tok)
            tokens.append(self._piece(tok))
            nll.append(round(n, 3))
            gap.append(round(g, 3))
            if k + 1 < len(answer):
                logits = self._llm.forward([tok])
        return Surprise(tokens, nll, gap)
