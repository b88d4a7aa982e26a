"""The pytest door collects one test per check of the suite (suites/support.py), named as the
lab names its records, and `--checks` selects by check name or group."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.suite import QWEN3_VL, Instance, case_ids

REPO = Path(__file__).resolve().parents[2]


def _collected(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "suites/qwen3_vl", "--collect-only", "-q",
                           "-p", "no:cacheprovider", *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    return [ln.split("::", 1)[1] for ln in proc.stdout.splitlines() if "::" in ln]


def test_pytest_collects_every_testcase_the_lab_names() -> None:
    lab_names = [c.testcase(i) for c in QWEN3_VL.checks
                 for i in QWEN3_VL.instances(c, visual=True, case_ids=case_ids(True))]
    assert sorted(_collected()) == sorted(lab_names)
    assert QWEN3_VL.check("export_shapes").testcase(Instance()) in lab_names


def test_checks_option_selects_by_group_or_name() -> None:
    assert sorted(_collected("--checks", "static")) == ["test_export_shapes", "test_quant_metadata"]
    structural = _collected("--checks", "structural")
    assert "test_export_shapes" in structural and "test_runtime_shape_guards[qnn/qnn]" in structural
    assert not [n for n in structural if n.startswith(("test_generation", "test_quant"))]
    # Issue 18: structural = positions, shapes and chunked equivalence (text-free exports).
    assert "test_chunked_prefill_equivalence" in structural and "test_mrope_positions_chunked" in structural
    assert _collected("--checks", "generation,chunked_prefill_equivalence")[-1] == "test_chunked_prefill_equivalence"
