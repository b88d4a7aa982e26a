"""A plan's and pytest's CPU ops expected outside the delegate (docs/placement.md#expected-cpu-ops):
a suite's `expected_cpu_ops` is read on load (a bad one is a plan error naming the key), without
it the suite's defaults stand, and what it allows reaches the judge: the shared KV program's one
Cast passes as a forward program's only when the plan lists it. `--expect-cpu-ops` with a typo
is a usage error (exit 4) before any test runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from labkit import write_plan

from harness.evidence import with_expected
from harness.lab.plan import PlanError, load_plan
from harness.outcomes import FailureClass
from harness.report import TestRecord
from harness.runners.executorch import ArtifactKind
from harness.suite.executorch import EXPECTED_CPU_OPS, judge_placement
from tests.qnn.material import et_qnn_or_skip

REPO = Path(__file__).resolve().parents[2]
CAST = "dim_order_ops::_to_dim_order_copy"


def _suite(**extra: object) -> list[dict[str, object]]:
    return [{"name": "matrix", "runner": "llm_demo", "models": ["tiny"], "backends": ["qnn", "cpu"], **extra}]


def test_a_plan_suite_lists_its_expected_cpu_ops(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, suites=_suite(expected_cpu_ops={CAST: 1, "Attention": 30})))
    assert plan.suites[0].expected_cpu_ops == {CAST: 1, "Attention": 30}
    assert load_plan(write_plan(tmp_path, suites=_suite())).suites[0].expected_cpu_ops is None  # the defaults


@pytest.mark.parametrize(("value", "said"), [({"Attention": -1}, "allows Attention -1 calls"),
                                             ({"Attention": "all"}, "allows Attention 'all' calls"),
                                             ({"": 1}, "names the op ''"),
                                             ([CAST], "not a mapping")])
def test_a_bad_expected_cpu_ops_is_a_plan_error_naming_the_key(tmp_path: Path, value: object, said: str) -> None:
    with pytest.raises(PlanError) as err:
        load_plan(write_plan(tmp_path, suites=_suite(expected_cpu_ops=value)))
    text = str(err.value)
    assert "nightly.yaml: key 'suites.matrix.expected_cpu_ops'" in text and said in text, text


def test_what_the_plan_allows_reaches_the_judge(tmp_path: Path) -> None:
    kv = et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte")
    allowed = load_plan(write_plan(tmp_path, suites=_suite(expected_cpu_ops={CAST: 1}))).suites[0].expected_cpu_ops
    rec = TestRecord(name="t", suite="executorch_qnn", device="emu")
    forward = EXPECTED_CPU_OPS[ArtifactKind.FORWARD]
    failed = judge_placement(kv, with_expected(forward, None), rec)  # the suite alone expects no Cast here
    assert failed is not None and failed.failure_class is FailureClass.CPU_FALLBACK
    assert judge_placement(kv, with_expected(forward, allowed), rec) is None


def test_a_bad_expect_cpu_ops_option_is_a_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", str(REPO / "suites" / "qwen3"), "-p", "no:cacheprovider",
                           "-q", "--expect-cpu-ops", "Attention=many"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert "--expect-cpu-ops 'Attention=many' allows Attention 'many' calls" in out, out
