"""The pytest door collects one test per check of the suite (suites/support.py), named as the
lab names its records, and `--checks` selects by check name or group."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.suite import QWEN3_VL, Instance, case_ids

REPO = Path(__file__).resolve().parents[2]


def _collect_all(*arg_sets: tuple[str, ...]) -> list[list[str]]:
    """`pytest suites/qwen3_vl --collect-only` once per argument set, the runs at once (each is
    mostly interpreter and plugin start-up)."""
    procs = [subprocess.Popen([sys.executable, "-m", "pytest", "suites/qwen3_vl", "--collect-only", "-q",
                               "-p", "no:cacheprovider", *args], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for args in arg_sets]
    outs = [proc.communicate(timeout=300)[0] for proc in procs]
    return [[ln.split("::", 1)[1] for ln in out.splitlines() if "::" in ln] for out in outs]


def _collected(*args: str) -> list[str]:
    return _collect_all(args)[0]


def test_pytest_collects_every_testcase_the_lab_names() -> None:
    lab_names = [c.testcase(i) for c in QWEN3_VL.checks
                 for i in QWEN3_VL.instances(c, visual=True, case_ids=case_ids(True))]
    assert sorted(_collected()) == sorted(lab_names)
    assert QWEN3_VL.check("export_shapes").testcase(Instance()) in lab_names


def test_checks_option_selects_by_group_or_name() -> None:
    static, structural, named = _collect_all(("--checks", "static"), ("--checks", "structural"),
                                             ("--checks", "generation,chunked_prefill_equivalence"))
    assert sorted(static) == ["test_export_shapes", "test_quant_metadata"]
    assert "test_export_shapes" in structural and "test_runtime_shape_guards[qnn/qnn]" in structural
    assert not [n for n in structural if n.startswith(("test_generation", "test_quant"))]
    # Issue 18: structural = positions, shapes and chunked equivalence (text-free exports).
    assert "test_chunked_prefill_equivalence" in structural and "test_mrope_positions_chunked" in structural
    assert named[-1] == "test_chunked_prefill_equivalence"
