"""checks/float_reference.py on files made here: the reference/ layout read and refused with the
file and key named, the per-step figures (KL, flips, NLL gap) on known logits, the typed evidence
through its JSON. The real lowerings are tests/suites/test_executorch_float_reference.py's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.checks import (
    DEFAULT_BUDGETS,
    FloatReference,
    QuantBudget,
    judge_float_reference,
    parse_budget_option,
    parse_budgets,
    quant_budget,
    read_float_reference,
)
from harness.checks.float_reference import compare_prompt
from harness.errors import ArtifactError
from harness.evidence import FloatReferenceAgreement
from harness.runners import QUANT_FORMATS


def _reference(export: Path, prompts: int = 3, steps: int = 6, vocab: int = 8) -> np.ndarray:
    rng = np.random.default_rng(0)
    ref = export / "reference"
    ref.mkdir(parents=True)
    logits = rng.normal(size=(prompts, steps, vocab)).astype(np.float32)
    entries = []
    for i in range(prompts):
        np.save(ref / f"p{i}.npy", logits[i])
        entries.append({"id": f"p{i}", "text": "t", "prompt_tokens": 3, "tokens": list(range(steps + 1)),
                        "logits": f"p{i}.npy"})
    (ref / "reference.json").write_text(json.dumps({"schema": "et-reference/1", "prompts": entries}))
    return logits


def _read(export: Path) -> FloatReference:
    ref = read_float_reference(export)
    assert ref is not None
    return ref


def test_no_reference_is_none(tmp_path: Path) -> None:
    assert read_float_reference(tmp_path) is None


@pytest.mark.parametrize("damage, named", [
    (lambda d: d.update(schema="other/9"), "schema is 'other/9'"),
    (lambda d: d["prompts"][1].update(tokens=[3]), "prompts[1].tokens"),
    (lambda d: d["prompts"][0].update(logits="../p0.npy"), "prompts[0].logits"),
])
def test_an_unusable_reference_is_refused_naming_the_file_and_key(tmp_path: Path, damage, named: str) -> None:
    _reference(tmp_path)
    index = tmp_path / "reference" / "reference.json"
    data = json.loads(index.read_text())
    damage(data)
    index.write_text(json.dumps(data))
    with pytest.raises(ArtifactError) as err:
        read_float_reference(tmp_path)
    assert str(index) in str(err.value) and named in str(err.value) and "docs/executorch-reference.md" in str(err.value)


def test_identical_logits_agree_with_zero_figures(tmp_path: Path) -> None:
    logits = _reference(tmp_path)
    ag = judge_float_reference(_read(tmp_path), logits, label="16a8w")
    assert ag.verdict == "agree" and ag.median_kl == pytest.approx(0, abs=1e-9)
    assert ag.median_flip_share == 0 and ag.median_nll_gap == pytest.approx(0, abs=1e-9)


def test_figures_on_known_logits() -> None:
    ref = np.log(np.array([[0.5, 0.5], [0.9, 0.1]], dtype=np.float64))
    prog = np.log(np.array([[0.5, 0.5], [0.1, 0.9]], dtype=np.float64))
    fig = compare_prompt(ref, prog, [0, 0, 0], prompt="p")
    kl_step2 = 0.9 * np.log(0.9 / 0.1) + 0.1 * np.log(0.1 / 0.9)
    assert fig.mean_kl == pytest.approx(kl_step2 / 2) and fig.flips == 1 and fig.counted == 2
    assert fig.nll_gap == pytest.approx((-np.log(0.1) + np.log(0.9)) / 2)
    assert fig.verdict == "disagree"  # an NLL gap of 1.1 nats: this prompt went astray


def test_a_shifted_program_is_over_budget_and_the_evidence_reads_back(tmp_path: Path) -> None:
    """End to end alone never names a fault (per-op evidence does, suite/executorch/float_reference.py):
    far from its float model is over the format's budget, said with the budget."""
    logits = _reference(tmp_path)
    ag = judge_float_reference(_read(tmp_path), np.roll(logits, 1, axis=-1), label="16a8w")
    budget = DEFAULT_BUDGETS["16a8w"].kl
    assert ag.verdict == "over-budget" and any("median mean KL" in r and f"> budget {budget:g}" in r for r in ag.reasons)
    assert ag.budget_kl == budget and f"budget KL {budget:g}" in ag.summary()
    assert FloatReferenceAgreement.of_json(json.loads(json.dumps(ag.to_json()))) == ag


def test_non_finite_logits_disagree_whatever_the_budget(tmp_path: Path) -> None:
    logits = _reference(tmp_path)
    logits[1, 2, 3] = np.nan
    ag = judge_float_reference(_read(tmp_path), logits, label="16a4w", budget=QuantBudget(kl=9.0, nll_gap=9.0))
    assert ag.verdict == "disagree" and "not finite" in ag.reasons[0]


def test_a_program_short_of_steps_is_an_error(tmp_path: Path) -> None:
    logits = _reference(tmp_path)
    ag = judge_float_reference(_read(tmp_path), logits[:, :3], label="16a8w")
    assert ag.verdict == "error"


def _program_at_kl(logits: np.ndarray, target: float) -> np.ndarray:
    """`logits` perturbed by one fixed noise, scaled so that the median over prompts of the mean
    KL(reference || program) is `target` (bisection: the KL grows with the scale)."""
    noise = np.random.default_rng(1).normal(size=logits.shape)
    ref = logits - logits.max(-1, keepdims=True)
    lr = ref - np.log(np.exp(ref).sum(-1, keepdims=True))

    def median_kl(scale: float) -> float:
        prog = ref + scale * noise
        lp = prog - np.log(np.exp(prog).sum(-1, keepdims=True))
        return float(np.median(np.mean(np.sum(np.exp(lr) * (lr - lp), -1), -1)))

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if median_kl(mid) < target else (lo, mid)
    return (logits + hi * noise).astype(np.float32)


@pytest.mark.parametrize("fmt, budget, verdict", [
    ("16a4w", None, "agree"), ("16a8w", None, "agree"), ("16a16w", None, "agree"),
    ("16a8w", QuantBudget(kl=0.01, nll_gap=1.0), "over-budget"), ("8a8w", QuantBudget(kl=0.02, nll_gap=1.0), "agree"),
])
def test_each_format_is_judged_on_its_budget(tmp_path: Path, fmt: str, budget: QuantBudget | None, verdict: str) -> None:
    """A median KL of 0.015 (a healthy 2-12 layer program's, docs/executorch-reference.md#calibration)
    is within every format's default budget; a user's tighter budget puts it over; a format not
    calibrated takes 16a4w's, the loosest."""
    logits = _reference(tmp_path, steps=40, vocab=128)
    ag = judge_float_reference(_read(tmp_path), _program_at_kl(logits, 0.015), label=fmt, budget=budget)
    assert ag.median_kl == pytest.approx(0.015, rel=1e-3)
    assert ag.verdict == verdict, ag.reasons
    assert quant_budget("16a16w") == DEFAULT_BUDGETS["16a4w"]


def test_budgets_from_a_plan_and_the_option_keep_the_defaults_they_do_not_set() -> None:
    got = parse_budgets({"16a4w": {"kl": 0.2}, "8a8w": {"nll_gap": 0.4, "kl": 1}}, "suites.x.quant_budget", QUANT_FORMATS)
    assert got["16a4w"] == QuantBudget(0.2, DEFAULT_BUDGETS["16a4w"].nll_gap) and got["8a8w"] == QuantBudget(1.0, 0.4)
    assert parse_budget_option(["16a4w:kl=0.2", "8a8w:nll_gap=0.4,kl=1"], QUANT_FORMATS) == got
    assert quant_budget("16a4w", got).kl == 0.2 and quant_budget("16a8w", got) == DEFAULT_BUDGETS["16a8w"]


@pytest.mark.parametrize("raw, named", [
    ({"16a5w": {"kl": 0.1}}, "Q.16a5w: not a quantization format"),
    ({"16a4w": {"kl": -1}}, "Q.16a4w.kl: -1 is not a positive number"),
    ({"16a4w": {"kl": "x"}}, "Q.16a4w.kl: 'x' is not a positive number"),
    ({"16a4w": {"klx": 0.1}}, "Q.16a4w.klx: not a budget figure"),
    ({"16a4w": 0.1}, "Q.16a4w: expected"),
    ([0.1], "Q: expected a mapping"),
])
def test_a_bad_budget_is_refused_naming_the_key(raw: object, named: str) -> None:
    with pytest.raises(ValueError, match="^" + named.replace(".", r"\.").replace("(", r"\(")):
        parse_budgets(raw, "Q", QUANT_FORMATS)


@pytest.mark.parametrize("text, named", [("16a4w", "write it as FORMAT:kl=X"), ("16a4w:kl=abc", "kl='abc' is not a number"),
                                         ("16a4w:kl", "--quant-budget.16a4w.kl: None is not a positive number")])
def test_a_bad_budget_option_is_refused_saying_how_to_write_it(text: str, named: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_budget_option([text], QUANT_FORMATS)
    assert named in str(err.value)
