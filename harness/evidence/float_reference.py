"""A QNN cell of a user's ExecuTorch export against its own float model (harness.checks.
float_reference): the reference it was judged against, the word, and the agreement figures over
the reference's prompts (medians and worst), typed; JUnit and the HTML read these."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, Fold, JsonObject, Row, Tone, fmt3, fmt6, json_number, json_object
from harness.evidence.teacher_forced import Agreement

FIGURES = ("median_kl", "worst_kl", "median_flip_share", "worst_flip_share", "median_nll_gap", "worst_nll_gap")


@dataclass(frozen=True)
class PromptAgreement:
    prompt: str
    verdict: str
    mean_kl: float | None
    nll_gap: float | None
    flips: int
    steps: int

    def to_json(self) -> JsonObject:
        return {"prompt": self.prompt, "verdict": self.verdict, "mean_kl": _round(self.mean_kl),
                "nll_gap": _round(self.nll_gap), "flips": self.flips, "steps": self.steps}

    @classmethod
    def of_json(cls, raw: JsonObject) -> Self:
        return cls(str(raw.get("prompt", "")), str(raw.get("verdict", "")), json_number(raw.get("mean_kl")),
                   json_number(raw.get("nll_gap")), int(raw.get("flips") or 0), int(raw.get("steps") or 0))


def _round(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 6)


@dataclass(frozen=True)
class FloatReferenceAgreement:
    KEY: ClassVar[str] = "float_reference"
    COLUMNS: ClassVar[tuple[Column, ...]] = (Column("float_reference_median_kl", "REAL", Fold.MEDIAN),)

    reference: str  # the reference.json judged against
    verdict: Agreement  # agree (within the budget) | over-budget | disagree (not finite) | error
    median_kl: float | None
    worst_kl: float | None
    median_flip_share: float | None
    worst_flip_share: float | None
    median_nll_gap: float | None
    worst_nll_gap: float | None
    reasons: tuple[str, ...] = ()
    prompts: tuple[PromptAgreement, ...] = ()
    budget_kl: float | None = None  # the format's quality budget it was judged on (checks.float_reference)
    budget_nll_gap: float | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == "agree"

    def junit(self) -> dict[str, str | None]:
        return {"float_reference": self.verdict.value, "float_reference_file": self.reference,
                "float_reference_prompts": str(len(self.prompts)),
                "float_reference_median_kl": fmt6(self.median_kl), "float_reference_worst_kl": fmt6(self.worst_kl),
                "float_reference_median_flip_share": fmt3(self.median_flip_share),
                "float_reference_worst_flip_share": fmt3(self.worst_flip_share),
                "float_reference_median_nll_gap": fmt6(self.median_nll_gap),
                "float_reference_worst_nll_gap": fmt6(self.worst_nll_gap),
                "float_reference_budget_kl": fmt6(self.budget_kl),
                "float_reference_budget_nll_gap": fmt6(self.budget_nll_gap)}

    def rows(self) -> tuple[Row, ...]:
        bad = self.verdict is not Agreement.AGREE
        why = "; ".join(self.reasons)
        text = f"{self.verdict.value}: " + (why if bad and why else self.summary())
        # over the budget is the quantization's cost (or, localized, a fault the ops name): a warning here
        warn = self.verdict in (Agreement.DRIFT, Agreement.OVER_BUDGET)
        return (Row("against its float model", text, Tone.PASS if not bad else Tone.WARN if warn else Tone.FAIL,
                    first=bad),)

    def views(self) -> tuple[object, ...]:
        return ()

    def columns(self) -> dict[str, Cell]:
        return {"float_reference_median_kl": self.median_kl}

    def summary(self) -> str:
        def f(x: float | None, fmt: str = ".4f") -> str:
            return "n/a" if x is None else format(x, fmt)

        return (f"{len(self.prompts)} prompts: mean KL median {f(self.median_kl)} (worst {f(self.worst_kl)}), "
                f"flipped steps median {f(self.median_flip_share, '.0%')} (worst {f(self.worst_flip_share, '.0%')}), "
                f"NLL gap median {f(self.median_nll_gap)} (worst {f(self.worst_nll_gap)})"
                + ("" if self.budget_kl is None else f"; budget KL {self.budget_kl:g}, NLL gap {self.budget_nll_gap:g}"))

    def to_json(self) -> JsonObject:
        return {"reference": self.reference, "verdict": self.verdict,
                **{k: _round(getattr(self, k)) for k in FIGURES}, "reasons": list(self.reasons),
                "prompts": [p.to_json() for p in self.prompts], "budget_kl": self.budget_kl,
                "budget_nll_gap": self.budget_nll_gap}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "a float-reference agreement")
        verdict, reference = raw.get("verdict"), raw.get("reference")
        if not isinstance(verdict, str) or not verdict or not isinstance(reference, str):
            raise ValueError("a float-reference agreement without its verdict or reference")
        n = {k: json_number(raw.get(k)) for k in FIGURES}
        return cls(reference, Agreement(verdict), n["median_kl"], n["worst_kl"], n["median_flip_share"], n["worst_flip_share"],
                   n["median_nll_gap"], n["worst_nll_gap"], tuple(str(r) for r in raw.get("reasons") or []),
                   tuple(PromptAgreement.of_json(p) for p in raw.get("prompts") or [] if isinstance(p, dict)),
                   json_number(raw.get("budget_kl")), json_number(raw.get("budget_nll_gap")))
