"""The pytest door onto a suite (harness/suite/): one test per check of the suite, parametrized
as the suite lists its testcases, each deciding through `harness.suite.run_check`, the call
the night's job makes too. A suite's test file is only:

    SUITE = QWEN3_VL
    globals().update(suite_tests(SUITE))
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

from harness.outcomes import Status
from harness.plugin import DECIDED
from harness.runners import RunnerKind
from harness.suite import Check, CheckInput, Instance, Scope, Suite, case_ids, run_check


def selected(suite: Suite, config: pytest.Config) -> Suite:
    """The suite with only the checks `--checks` names (a check or a group); all without it."""
    raw = config.getoption("--checks", default=None)
    words = [w.strip() for w in raw.split(",") if w.strip()] if raw else None
    try:
        return suite.select(words)
    except KeyError as exc:
        raise pytest.UsageError(f"--checks: {exc.args[0]!r} is not a check of suite {suite.name} "
                                f"(known: {', '.join(suite.words())})") from None


# The session fixture (suites/conftest.py) that gives each scope's input; a test uses it up
# front, so the matrix runs in the setup phase and no test's own time holds it.
INPUT_FIXTURE = {Scope.EXPORT: "export_input", Scope.CELL: "matrix_input", Scope.PAIR: "matrix_input",
                 Scope.DEVICE: "device_input", Scope.SUMMARY: "summary_input"}
# A suite whose runner is not llm_demo has one input for every check (its conftest gives it).
RUNNER_INPUT_FIXTURE = {RunnerKind.EXECUTORCH: "et_input"}


def input_fixture(suite: Suite, check: Check) -> str:
    return RUNNER_INPUT_FIXTURE.get(suite.runner) or INPUT_FIXTURE[check.scope]


def _test_for(suite: Suite, check: Check) -> Callable[..., None]:
    fixture = input_fixture(suite, check)

    def decide(request: pytest.FixtureRequest, device_record: Any, instance: Instance) -> None:
        chosen: Suite = request.getfixturevalue("suite")
        inp: CheckInput = request.getfixturevalue(fixture)
        verdict = run_check(chosen, check, instance, inp, device_record)
        request.node.stash[DECIDED] = verdict  # the record holds it: the plugin writes no other
        if verdict.status is Status.SKIPPED:
            pytest.skip(verdict.message)
        if verdict.status is not Status.PASSED:
            where = f"{instance.pair} {instance.case_id}: " if instance.case_id else ""
            raise AssertionError(f"{where}{verdict.failure_class}: {verdict.message}")
        if verdict.warn_with is not None:
            warnings.warn(verdict.warn_with, stacklevel=2)

    def cell_test(request: pytest.FixtureRequest, device_record: Any, instance: Instance) -> None:
        decide(request, device_record, instance)

    def whole_test(request: pytest.FixtureRequest, device_record: Any) -> None:
        decide(request, device_record, Instance())

    parametrized = check.scope in (Scope.CELL, Scope.PAIR, Scope.FORMAT)
    test: Callable[..., None] = cell_test if parametrized else whole_test
    # The scope's input is set up before the test (its setup phase), not inside its call.
    test = pytest.mark.usefixtures(fixture)(test)
    test.__name__ = test.__qualname__ = check.test_name
    test.__doc__ = check.doc
    instances = suite.instances(check, visual=bool(suite.visual), case_ids=case_ids(bool(suite.visual)))
    if parametrized:
        test = pytest.mark.parametrize("instance", instances, ids=[i.id for i in instances])(test)
    for mark in check.marks:
        test = getattr(pytest.mark, mark)(test)
    # Which check the test decides: suites/conftest.py deselects by it (harness/plugin.py registers it).
    return pytest.mark.suite_check(check.name)(test)


def suite_tests(suite: Suite) -> dict[str, Any]:
    """One test function per check, named as the lab names its records (test_<check>), and the
    session's `suite` fixture (the suite with the `--checks` selection) the conftest's use."""

    @pytest.fixture(scope="session", name="suite")
    def suite_fixture(pytestconfig: pytest.Config) -> Suite:
        return selected(suite, pytestconfig)

    return {"suite_fixture": suite_fixture, **{c.test_name: _test_for(suite, c) for c in suite.checks}}
