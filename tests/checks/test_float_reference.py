"""checks/float_reference.py on files made here: the reference/ layout read and refused with the
file and key named, the per-step figures (KL, flips, NLL gap) on known logits, the typed evidence
through its JSON. The real lowerings are tests/suites/test_executorch_float_reference.py's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.checks import (
    FLOAT_REFERENCE_THRESHOLDS,
    FloatReference,
    float_reference_thresholds,
    judge_float_reference,
    read_float_reference,
)
from harness.checks.float_reference import compare_prompt
from harness.errors import ArtifactError
from harness.evidence import FloatReferenceAgreement


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
    fig = compare_prompt(ref, prog, [0, 0, 0], prompt="p", thresholds=float_reference_thresholds("16a8w"))
    kl_step2 = 0.9 * np.log(0.9 / 0.1) + 0.1 * np.log(0.1 / 0.9)
    assert fig.mean_kl == pytest.approx(kl_step2 / 2) and fig.flips == 1 and fig.counted == 2
    assert fig.nll_gap == pytest.approx((-np.log(0.1) + np.log(0.9)) / 2)
    assert fig.verdict == "disagree"


def test_a_shifted_program_disagrees_and_the_evidence_reads_back(tmp_path: Path) -> None:
    logits = _reference(tmp_path)
    ag = judge_float_reference(_read(tmp_path), np.roll(logits, 1, axis=-1), label="16a8w")
    assert ag.verdict == "disagree" and any("median mean KL" in r for r in ag.reasons)
    assert FloatReferenceAgreement.of_json(json.loads(json.dumps(ag.to_json()))) == ag


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


@pytest.mark.parametrize("fmt, verdict", [("16a4w", "agree"), ("16a8w", "drift"), ("8a8w", "drift"), ("16a16w", "agree")])
def test_each_format_is_judged_on_its_own_lines(tmp_path: Path, fmt: str, verdict: str) -> None:
    """A median KL of 0.015 is inside 16a4w's healthy band (4-bit weights: healthy up to 0.0136)
    and beyond 16a8w's and 8a8w's (docs/executorch-reference.md#calibration); a format not
    calibrated takes the loosest lines, 16a4w's."""
    logits = _reference(tmp_path, steps=40, vocab=128)
    ag = judge_float_reference(_read(tmp_path), _program_at_kl(logits, 0.015), label=fmt)
    assert ag.median_kl == pytest.approx(0.015, rel=1e-3)
    assert ag.verdict == verdict, ag.reasons
    assert FLOAT_REFERENCE_THRESHOLDS["16a8w"].export_drift_kl < 0.015 < FLOAT_REFERENCE_THRESHOLDS["16a4w"].export_drift_kl
