"""A plan's `models:` and `suites:` (harness/lab/plan/load.py): each model's export folder (or
per-device template) and kind, each suite's models, backend pairs, runner and `checks:`, and
that every llm_demo entry finds its runtime folder."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from harness.checks import QuantBudget, parse_budgets
from harness.evidence import parse_expected_cpu_ops
from harness.lab.plan.fields import PlanCtx, check_positive, get_value, read_names
from harness.lab.plan.paths import parse_options, plan_path
from harness.lab.plan.specs import ModelSpec, SuiteSpec
from harness.pairs import ALL_NAMES, BackendPair
from harness.runners import QUANT_FORMATS, RunnerKind
from harness.suite import suite_for
from harness.validation import check_keys, type_name

BACKEND_PAIRS = ALL_NAMES  # every pair name (harness/pairs.py)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MODEL_KEYS = {"path", "kind", "options"}
_SUITE_KEYS = {"name", "runner", "models", "backends", "timeout_s", "options", "checks", "localize", "expected_cpu_ops",
               "quant_budget", "allow_unjudged"}
# Lab jobs that exist (harness/lab/cli.py picks the job by runner).
RUNNERS = tuple(k.value for k in RunnerKind)


def parse_models(ctx: PlanCtx, raw: object, base: Path) -> dict[str, ModelSpec]:
    if not isinstance(raw, dict) or not raw:
        raise ctx.fail("models", "must be a non-empty mapping of model name to {path: ...}",
                       "write `models: {smollm2: {path: /exports/smollm2}}`")
    models = {}
    for name, spec in raw.items():
        label = f"models.{name}"
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ctx.fail(label, "is not a valid model name", "use letters, digits, '.', '_' or '-'")
        if isinstance(spec, str):
            spec = {"path": spec}
        if not isinstance(spec, dict):
            raise ctx.fail(label, f"must be a mapping or a path, got {type_name(spec)}",
                           "write `{path: /exports/NAME}`")
        check_keys(ctx, label, spec, _MODEL_KEYS)
        raw_path = get_value(ctx, spec, "path", str, f"{label}.path", required=True)
        path_text, templated = plan_path(ctx, f"{label}.path", raw_path, base)
        path = Path(path_text)
        if not templated and not path.is_dir():
            raise ctx.fail(f"{label}.path", f"{path} is not a folder",
                           "point it at the exported model folder (absolute, or relative to the plan file)")
        kind = get_value(ctx, spec, "kind", str, f"{label}.kind", default="mnn")
        if kind not in ("mnn", "executorch"):
            raise ctx.fail(f"{label}.kind", f"{kind!r} is not a model kind", "use mnn or executorch")
        options = parse_options(ctx, spec, f"{label}.options", base)
        models[name] = ModelSpec(name=name, path=path, kind=kind, options=options)
    return models


def parse_suites(ctx: PlanCtx, raw: object, models: dict[str, ModelSpec], base: Path) -> tuple[SuiteSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise ctx.fail("suites", "must be a non-empty list", "list at least one `- name: ...` suite")
    suites = []
    seen = set()
    for i, spec in enumerate(raw):
        label = f"suites[{i}]"
        if not isinstance(spec, dict):
            raise ctx.fail(label, f"is a {type_name(spec)}, not a mapping", "write `- name: ..., models: [...]`")
        check_keys(ctx, label, spec, _SUITE_KEYS)
        name = get_value(ctx, spec, "name", str, f"{label}.name", required=True)
        if not _NAME_RE.match(name):
            raise ctx.fail(f"{label}.name", f"{name!r} is not a valid suite name", "use letters, digits, '.', '_' or '-'")
        if name in seen:
            raise ctx.fail(f"{label}.name", f"suite {name!r} appears twice", "give each suite its own name")
        seen.add(name)
        label = f"suites.{name}"
        suite_models = read_names(ctx, spec, "models", f"{label}.models") or tuple(models)
        for m in suite_models:
            if m not in models:
                raise ctx.fail(f"{label}.models", f"names model {m!r} which is not under `models:` "
                               f"(known: {', '.join(models)})", "add it to `models:` or fix the name")
        # No `backends:` means every backend pair the export has configs for.
        names = read_names(ctx, spec, "backends", f"{label}.backends") or ()
        for b in names:
            if b not in BACKEND_PAIRS:
                raise ctx.fail(f"{label}.backends", f"{b!r} is not a backend pair",
                               f"use {', '.join(BACKEND_PAIRS)} (visual/llm for VL models)")
        backends = tuple(BackendPair.parse(b) for b in names)
        timeout = get_value(ctx, spec, "timeout_s", (int, float), f"{label}.timeout_s", default=900.0)
        check_positive(ctx, f"{label}.timeout_s", timeout)
        # A registered suite names its runner; `runner:` may only say the same.
        own = suite_for(name).runner.value
        runner = get_value(ctx, spec, "runner", str, f"{label}.runner", default=own)
        if runner not in RUNNERS:
            raise ctx.fail(f"{label}.runner", f"{runner!r} has no lab job (lab jobs exist for: {', '.join(RUNNERS)})",
                           "use one of them, or run that suite with pytest suites/")
        if runner != own:
            raise ctx.fail(f"{label}.runner", f"is {runner!r} but suite {name!r} drives {own}",
                           f"remove `runner:` or write `runner: {own}`")
        checks = read_names(ctx, spec, "checks", f"{label}.checks")
        try:
            suite_for(name).select(checks)
        except KeyError as exc:
            raise ctx.fail(f"{label}.checks", f"{exc.args[0]!r} is not a check of suite {name!r}",
                           f"use {', '.join(suite_for(name).words())}") from None
        localize = get_value(ctx, spec, "localize", bool, f"{label}.localize", default=False)
        if localize and "localize" not in suite_for(name).words():
            raise ctx.fail(f"{label}.localize", f"suite {name!r} has no localize check",
                           "remove `localize:` (only executorch_qnn localizes a format's program)")
        suites.append(SuiteSpec(
            name=name, runner=runner, models=suite_models, backends=backends, timeout_s=float(timeout),
            options=parse_options(ctx, spec, f"{label}.options", base), checks=checks, localize=localize,
            expected_cpu_ops=_expected_cpu_ops(ctx, spec, f"{label}.expected_cpu_ops"),
            quant_budget=_quant_budget(ctx, spec, f"{label}.quant_budget", suite_models),
            allow_unjudged=get_value(ctx, spec, "allow_unjudged", bool, f"{label}.allow_unjudged", default=False),
        ))
    return tuple(suites)


def _expected_cpu_ops(ctx: PlanCtx, spec: Mapping[str, object], label: str) -> dict[str, int] | None:
    """Ops the suite's QNN cells may run outside the delegate beyond its own defaults
    (docs/placement.md#expected-cpu-ops); None: the defaults alone."""
    if "expected_cpu_ops" not in spec:
        return None
    try:
        return parse_expected_cpu_ops(spec["expected_cpu_ops"])
    except ValueError as exc:
        raise ctx.fail(label, str(exc), "write `expected_cpu_ops: {dim_order_ops::_to_dim_order_copy: 1}` "
                       "(op to the calls allowed on the CPU)") from None


def _quant_budget(ctx: PlanCtx, spec: dict[str, object], label: str,
                  models: tuple[str, ...]) -> dict[str, dict[str, QuantBudget]] | None:
    """`quant_budget: {16a4w: {kl: 0.1, nll_gap: 0.3}, MODEL: {8a8w: {kl: 0.06}}}`: a format's budget
    for every model of the entry, or a model's own (docs/executorch-reference.md#the-verdict)."""
    raw = spec.get("quant_budget")
    if raw is None:
        return None
    advice = ("write `quant_budget: {16a4w: {kl: 0.1, nll_gap: 0.3}}`, a model's own under its name "
              "(docs/executorch-reference.md#the-verdict)")
    if not isinstance(raw, dict):
        raise ctx.fail(label, f"is {type_name(raw)}, not a mapping", advice)
    try:
        out = {"": parse_budgets({k: v for k, v in raw.items() if k not in models}, label, QUANT_FORMATS)}
        out.update({m: parse_budgets(raw[m], f"{label}.{m}", QUANT_FORMATS) for m in models if m in raw})
    except ValueError as exc:
        key, _, problem = str(exc).partition(": ")
        raise ctx.fail(key, problem, advice) from None
    return out


def _check_executorch_model(ctx: PlanCtx, suite: SuiteSpec, model: ModelSpec) -> None:
    """An ExecuTorch suite's model folder holds a program: a night of "all skipped" is a plan error."""
    if suite.runner != "executorch" or "{" in str(model.path) or not model.path.is_dir():
        return  # a per-device path is checked when the device is known
    from harness.export import folder_contents
    from harness.runners.executorch import holds_programs

    if not holds_programs(model.path):
        raise ctx.fail(f"models.{model.name}.path", f"{model.path} holds no program the ExecuTorch suite "
                       f"{suite.name!r} can run (it holds {folder_contents(model.path)})",
                       "point it at one export (a .pte and its tokenizer), a folder with one export per quant "
                       "format, or host QNN material (docs/executorch-runner.md#model-folders)")


def check_runner_options(ctx: PlanCtx, plan_options: Mapping[str, object], models: dict[str, ModelSpec],
                         suites: tuple[SuiteSpec, ...]) -> None:
    """Every llm_demo entry finds a runtime folder in its merged options (plan < model < suite)."""
    for suite in suites:
        for m in suite.models:
            merged = {**plan_options, **models[m].options, **suite.options}
            _check_executorch_model(ctx, suite, models[m])
            if suite.runner == "llm_demo" and "runtime_dir" not in merged:
                raise ctx.fail("options.runtime_dir", f"is missing for suite {suite.name!r} with model {m!r}",
                               "point it at the folder with llm_demo and its libraries (it may use {htp_arch}); "
                               "set it under the plan's, the model's or the suite's `options:`")
