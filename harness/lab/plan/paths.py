"""Paths and environment in a plan (harness/lab/plan/load.py): `$VAR`/`${VAR}` from the run's
environment, the device fields of a per-device path, paths taken from the plan's folder, the
`env:` mappings (plan options and `exports:` builds alike), and the `options:` that hold them."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from pathlib import Path

from harness.lab.plan.fields import PlanCtx, check_positive, get_value
from harness.lab.plan.specs import PATH_FIELDS
from harness.validation import check_env_var, type_name

# Options the llm_demo job reads (harness/lab/jobs.py llm_matrix_job); others pass through as-is.
PATH_OPTIONS = ("runtime_dir", "qnn_sdk")
_ENV_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_env(ctx: PlanCtx, label: str, raw: str) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in ctx.environ:
            raise ctx.fail(label, f"{raw!r} uses ${name}, which is not set",
                           f"set {name} in the environment of the run or write the path out")
        return ctx.environ[name]

    return _ENV_REF_RE.sub(sub, raw)


def plan_path(ctx: PlanCtx, label: str, raw: str, base: Path) -> tuple[str, bool]:
    """A path from the plan: env vars expanded, relative to the plan's folder, device fields
    checked. Returns (absolute path or template, whether it is a per-device template)."""
    expanded = expand_env(ctx, label, raw)
    try:
        fields_used = {f for _, f, _, _ in string.Formatter().parse(expanded) if f is not None}
    except ValueError as exc:
        raise ctx.fail(label, f"{raw!r} has broken braces ({exc})",
                       f"use {{{'}, {'.join(PATH_FIELDS)}}} or no braces") from None
    bad = sorted(fields_used - set(PATH_FIELDS))
    if bad:
        raise ctx.fail(label, f"{{{bad[0]}}} is not a device field",
                       f"use only {', '.join('{' + f + '}' for f in PATH_FIELDS)}")
    path = Path(expanded).expanduser()
    path = path if path.is_absolute() else (base / path)
    if fields_used:
        return str(path), True
    try:
        return str(path.resolve()), False
    except (RuntimeError, OSError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise ctx.fail(label, f"{path} cannot be resolved ({exc}): a symlink loop or an unreadable folder",
                       "point it at the real folder (fix or remove the link)") from None


def parse_options(ctx: PlanCtx, holder: Mapping[str, object], label: str, base: Path) -> dict[str, object]:
    """`options:` (plan, model or suite level): env names, runner paths and numbers checked."""
    options = dict(get_value(ctx, holder, "options", dict, label, default={}))
    if "env" in options:
        env = options["env"]
        if not isinstance(env, dict):
            raise ctx.fail(f"{label}.env", f"must be a mapping of variable to value, got {type_name(env)}",
                           "write `env: {NAME: value}`")
        for name, value in env.items():
            check_env_var(ctx, f"{label}.env", name, value)
    for key in PATH_OPTIONS:
        if key in options:
            if not isinstance(options[key], str) or not options[key]:
                raise ctx.fail(f"{label}.{key}", f"must be a path, got {type_name(options[key])}",
                               "write the folder's path")
            path, templated = plan_path(ctx, f"{label}.{key}", options[key], base)
            if not templated and not Path(path).is_dir():
                raise ctx.fail(f"{label}.{key}", f"{path} is not a folder",
                               "point it at an existing folder (absolute, or relative to the plan file)")
            options[key] = path
    for key, integer in (("max_new_tokens", True), ("seq_len", True), ("timeout_s", False)):
        if key in options:
            value = get_value(ctx, options, key, int if integer else (int, float), f"{label}.{key}")
            check_positive(ctx, f"{label}.{key}", value)
    return options
