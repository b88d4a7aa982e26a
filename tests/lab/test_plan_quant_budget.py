"""The quality budget and `allow_unjudged` of the verdict (docs/executorch-reference.md#the-verdict):
a plan suite's `quant_budget` is read on load, per format for every model of the entry and a model's
own under its name; a bad one is a plan error naming the key (exit 4 at load). `--quant-budget` and
`--export-format` with a typo are usage errors (exit 4) before any test runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from labkit import write_plan

from harness.checks import DEFAULT_BUDGETS, QuantBudget
from harness.lab.plan import PlanError, load_plan

REPO = Path(__file__).resolve().parents[2]


def _suite(**extra: object) -> list[dict[str, object]]:
    return [{"name": "matrix", "runner": "llm_demo", "models": ["tiny"], "backends": ["qnn", "cpu"], **extra}]


def test_a_plan_sets_budgets_per_format_and_per_model(tmp_path: Path) -> None:
    raw = {"16a4w": {"kl": 0.12}, "tiny": {"8a8w": {"kl": 0.06, "nll_gap": 0.3}, "16a4w": {"nll_gap": 0.4}}}
    suite = load_plan(write_plan(tmp_path, suites=_suite(quant_budget=raw, allow_unjudged=True))).suites[0]
    got = suite.budgets_for("tiny")
    assert got is not None and got["8a8w"] == QuantBudget(0.06, 0.3)
    assert got["16a4w"] == QuantBudget(DEFAULT_BUDGETS["16a4w"].kl, 0.4)  # the model's own over the entry's
    assert suite.budgets_for("other") == {"16a4w": QuantBudget(0.12, DEFAULT_BUDGETS["16a4w"].nll_gap)}
    assert suite.allow_unjudged
    plain = load_plan(write_plan(tmp_path, suites=_suite())).suites[0]
    assert plain.budgets_for("tiny") is None and not plain.allow_unjudged


@pytest.mark.parametrize(("value", "key", "said"), [
    ({"16a4w": {"kl": "x"}}, "suites.matrix.quant_budget.16a4w.kl", "'x' is not a positive number"),
    ({"tiny": {"16a4w": {"nll": 1}}}, "suites.matrix.quant_budget.tiny.16a4w.nll", "not a budget figure"),
    ({"16a3w": {"kl": 1}}, "suites.matrix.quant_budget.16a3w", "not a quantization format"),
    (0.1, "suites.matrix.quant_budget", "not a mapping"),
])
def test_a_bad_budget_is_a_plan_error_naming_the_key(tmp_path: Path, value: object, key: str, said: str) -> None:
    with pytest.raises(PlanError) as err:
        load_plan(write_plan(tmp_path, suites=_suite(quant_budget=value)))
    text = str(err.value)
    assert f"nightly.yaml: key '{key}'" in text and said in text and "quant_budget: {16a4w:" in text, text


@pytest.mark.parametrize(("argv", "said"), [(["--quant-budget", "16a4w:kl=lots"], "kl='lots' is not a number"),
                                            (["--export-format", "4a4w"], "--export-format '4a4w' is not a quant format")])
def test_a_bad_option_is_a_usage_error(argv: list[str], said: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", str(REPO / "suites" / "qwen3"), "-p", "no:cacheprovider",
                           "-q", *argv], cwd=REPO, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert said in out, out
