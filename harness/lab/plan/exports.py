"""`exports:` of a plan, validated at load (harness/lab/plan/load.py calls `parse_exports`): every
problem is one PlanError naming the file and the key (exit 4): an unknown placeholder, an
unknown SoC, an input that does not exist, a shell command whose placeholder is already quoted,
`debug: true` without the exporter's `debug_args`. `localized_exports` joins the suites' `localize:`
to the builds: a localized exported model gets its debug build, or the plan says why it cannot."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import soc
from harness.lab.plan.export_spec import (
    DEFAULT_TIMEOUT_S,
    LAB_TARGETS,
    PLACEHOLDERS,
    ExportBuild,
    ExportsSpec,
)
from harness.validation import FailFn, check_env_var, check_keys, type_name, typed_get

_SECTION_KEYS = {"parallel", "cache", "builds"}
_CACHE_KEYS = {"max_gb"}
_BUILD_KEYS = {"model", "kind", "command", "targets", "formats", "inputs", "timeout_s", "env", "shell",
               "qnn_host", "debug_args", "debug"}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ENV_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class _Parser:
    def __init__(self, ctx: FailFn, base: Path, environ: dict[str, str], taken: set[str]):
        self.ctx, self.base, self.environ, self.taken = ctx, base, environ, taken

    def fail(self, key: str, problem: str, fix: str) -> Exception:
        return self.ctx.fail(key, problem, fix)

    def expand(self, label: str, raw: str) -> str:
        """`${VAR}` from the environment, as plan paths take them (an unset one is an error)."""
        def sub(m: re.Match[str]) -> str:
            if m.group(1) not in self.environ:
                raise self.fail(label, f"{raw!r} uses ${{{m.group(1)}}}, which is not set",
                                f"set {m.group(1)} in the environment of the run or write the value out")
            return self.environ[m.group(1)]

        return _ENV_REF_RE.sub(sub, raw)

    def placeholders(self, label: str, text: str) -> set[str]:
        try:
            fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(text) if f is not None]
        except ValueError as exc:
            raise self.fail(label, f"{text!r} has broken braces ({exc})",
                            "write placeholders as {soc}, double a literal brace ({{ }})") from None
        for f, spec, conv in fields:
            if spec or conv:  # each value is put in as it is: a format spec or conversion would break the stage
                written = "{" + f + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
                raise self.fail(label, f"{written} has a {'conversion' if conv else 'format spec'}",
                                f"write the placeholder bare ({{{f}}}); the harness puts each value in as it is")
        used = {f for f, _, _ in fields}
        bad = sorted(used - set(PLACEHOLDERS))
        if bad:
            raise self.fail(label, f"{{{bad[0]}}} is not a placeholder",
                            f"use only {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
        return used

    def command(self, label: str, spec: Mapping[str, object], shell: bool) -> tuple[str, ...] | str:
        raw = typed_get(self.ctx, spec, "command", (list, str), label=f"{label}.command", required=True)
        if shell:
            if not isinstance(raw, str):
                raise self.fail(f"{label}.command", "is a list but `shell: true` runs one string",
                                "write the command as one string, or drop `shell: true`")
            text = self.expand(f"{label}.command", raw)
            used = self.placeholders(f"{label}.command", text)
            # The stage quotes every value itself (shlex.quote); quoted twice, the quotes would
            # become part of the value.
            for name in used:
                token = re.escape("{" + name + "}")
                if re.search(f"['\"]{token}|{token}['\"]", text):
                    raise self.fail(f"{label}.command", f"{{{name}}} is written inside quotes",
                                    "leave placeholders unquoted: the harness shlex-quotes each value")
            parts: list[str] = [text]
        else:
            if isinstance(raw, str):
                raise self.fail(f"{label}.command", "is one string; without a shell a command is an argv list",
                                "write it as a list ([python, lower.py, --out, '{out}']) or add `shell: true`")
            if not raw or not all(isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in raw):
                raise self.fail(f"{label}.command", "must be a non-empty list of strings",
                                "write each argument as a string")
            parts = [self.expand(f"{label}.command[{i}]", str(a)) for i, a in enumerate(raw)]
            used = set().union(*(self.placeholders(f"{label}.command[{i}]", p) for i, p in enumerate(parts)))
        if "out" not in used:
            raise self.fail(f"{label}.command", "never names {out}, the folder the export must be written to",
                            "pass {out} as the exporter's output folder")
        return parts[0] if shell else tuple(parts)

    def targets(self, label: str, spec: Mapping[str, object]) -> tuple[str, ...]:
        raw = typed_get(self.ctx, spec, "targets", (list, str), label=f"{label}.targets", required=True,
                        missing_fix="list the SoCs to export for (targets: [SM8650, SA8295]) or write `targets: lab`")
        if raw == LAB_TARGETS:
            return (LAB_TARGETS,)
        items = [raw] if isinstance(raw, str) else raw
        if not items:
            raise self.fail(f"{label}.targets", "is empty", "list at least one SoC, or write `targets: lab`")
        out = []
        for item in items:
            info = soc.lookup(str(item)) if isinstance(item, str) else None
            if info is None:
                raise self.fail(f"{label}.targets", f"{item!r} is not a SoC of the SoC table",
                                "use a SoC model such as SM8650, SM8750 or SA8295 (docs/soc-table.md), or `lab`")
            if info.model not in out:
                out.append(info.model)
        return tuple(out)

    def debug_args(self, label: str, spec: Mapping[str, object]) -> tuple[str, ...]:
        """The exporter's arguments for its debug build: a list of strings, the command's
        placeholders allowed ({out} is the debug build's own folder)."""
        raw = typed_get(self.ctx, spec, "debug_args", list, label=f"{label}.debug_args", default=[],
                        missing_fix="list the exporter's arguments for its debug build: debug_args: [--debug-program]")
        if "debug_args" in spec and not raw:
            raise self.fail(f"{label}.debug_args", "is empty",
                            "list the arguments that make the exporter write its debug build ([--debug-program]), "
                            "or drop the key")
        out = []
        for i, arg in enumerate(raw):
            if not isinstance(arg, (str, int, float)) or isinstance(arg, bool):
                raise self.fail(f"{label}.debug_args[{i}]", f"must be a string, got {type_name(arg)}",
                                "write each argument as a string")
            text = self.expand(f"{label}.debug_args[{i}]", str(arg))
            self.placeholders(f"{label}.debug_args[{i}]", text)
            out.append(text)
        debug = typed_get(self.ctx, spec, "debug", bool, label=f"{label}.debug", default=False)
        if debug and not out:
            raise self.fail(f"{label}.debug", "asks for the debug build but the build has no `debug_args`",
                            "add the exporter's debug arguments (debug_args: [--debug-program]) or drop `debug: true`")
        return tuple(out)

    def names(self, label: str, spec: Mapping[str, object], key: str) -> tuple[str, ...]:
        raw = typed_get(self.ctx, spec, key, (list, str), label=f"{label}.{key}", required=True)
        items = [raw] if isinstance(raw, str) else raw
        if not items or not all(isinstance(i, str) and _NAME_RE.match(i) for i in items):
            raise self.fail(f"{label}.{key}", f"must list names (letters, digits, '.', '_', '-'), got {raw!r}",
                            "write e.g. `formats: [16a4w, 8a8w]`")
        return tuple(dict.fromkeys(items))

    def inputs(self, label: str, spec: Mapping[str, object]) -> tuple[Path, ...]:
        raw = typed_get(self.ctx, spec, "inputs", list, label=f"{label}.inputs", default=[])
        out = []
        for i, item in enumerate(raw):
            if not isinstance(item, str) or not item:
                raise self.fail(f"{label}.inputs[{i}]", f"must be a path, got {type_name(item)}",
                                "list the files and folders whose content decides a rebuild")
            path = Path(self.expand(f"{label}.inputs[{i}]", item)).expanduser()
            path = path if path.is_absolute() else self.base / path
            if not path.exists():
                raise self.fail(f"{label}.inputs[{i}]", f"{path} does not exist",
                                "point it at the model folder or recipe file the export reads")
            out.append(path.resolve())
        return tuple(out)

    def env(self, label: str, spec: Mapping[str, object]) -> dict[str, str]:
        raw = typed_get(self.ctx, spec, "env", dict, label=f"{label}.env", default={})
        out = {}
        for name, value in raw.items():
            check_env_var(self.ctx, f"{label}.env", name, value)
            out[name] = self.expand(f"{label}.env.{name}", str(value))
        return out

    def build(self, i: int, spec: object) -> ExportBuild:
        label = f"exports.builds[{i}]"
        if not isinstance(spec, dict):
            raise self.fail(label, f"is a {type_name(spec)}, not a mapping", "write `- model: NAME, command: [...]`")
        check_keys(self.ctx, label, spec, _BUILD_KEYS)
        model = typed_get(self.ctx, spec, "model", str, label=f"{label}.model", required=True)
        if not _NAME_RE.match(model):
            raise self.fail(f"{label}.model", f"{model!r} is not a valid model name", "use letters, digits, '.', '_', '-'")
        if model in self.taken:
            raise self.fail(f"{label}.model", f"model {model!r} is already defined (under `models:` or another build)",
                            "give the exported model its own name")
        self.taken.add(model)
        kind = typed_get(self.ctx, spec, "kind", str, label=f"{label}.kind", default="executorch")
        if kind not in ("mnn", "executorch"):
            raise self.fail(f"{label}.kind", f"{kind!r} is not a model kind", "use mnn or executorch")
        shell = typed_get(self.ctx, spec, "shell", bool, label=f"{label}.shell", default=False)
        timeout = typed_get(self.ctx, spec, "timeout_s", (int, float), label=f"{label}.timeout_s",
                            default=DEFAULT_TIMEOUT_S)
        if timeout <= 0:
            raise self.fail(f"{label}.timeout_s", f"{timeout} must be positive", "give a number of seconds above zero")
        return ExportBuild(
            model=model, command=self.command(label, spec, shell), targets=self.targets(label, spec),
            formats=self.names(label, spec, "formats"), inputs=self.inputs(label, spec), kind=kind,
            timeout_s=float(timeout), env=self.env(label, spec), shell=shell,
            qnn_host=typed_get(self.ctx, spec, "qnn_host", bool, label=f"{label}.qnn_host", default=False),
            cwd=self.base, label=label, debug_args=self.debug_args(label, spec), debug=bool(spec.get("debug", False)),
        )


def parse_exports(ctx: FailFn, raw: object, base: Path, environ: dict[str, str],
                  taken: set[str]) -> ExportsSpec | None:
    """The plan's `exports:` (None when absent); `taken` holds the plan's own model names."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ctx.fail("exports", f"must be a mapping, got {type_name(raw)}",
                       "write `exports: {builds: [- model: ..., command: [...]]}` (docs/exports.md)")
    check_keys(ctx, "exports", raw, _SECTION_KEYS)
    parser = _Parser(ctx, base, environ, set(taken))
    builds_raw = typed_get(ctx, raw, "builds", list, label="exports.builds", required=True)
    if not builds_raw:
        raise ctx.fail("exports.builds", "is empty", "list at least one export, or drop `exports:`")
    builds = tuple(parser.build(i, b) for i, b in enumerate(builds_raw))
    parallel = typed_get(ctx, raw, "parallel", int, label="exports.parallel")
    if parallel is not None and parallel < 1:
        raise ctx.fail("exports.parallel", f"{parallel} must be 1 or more", "give how many exports may run at once")
    cache = typed_get(ctx, raw, "cache", dict, label="exports.cache", default={})
    check_keys(ctx, "exports.cache", cache, _CACHE_KEYS)
    max_gb = typed_get(ctx, cache, "max_gb", (int, float), label="exports.cache.max_gb", default=20)
    if max_gb <= 0:
        raise ctx.fail("exports.cache.max_gb", f"{max_gb} must be positive", "give the cache's size bound in GB")
    return ExportsSpec(builds=builds, parallel=parallel, cache_max_bytes=int(max_gb * (1 << 30)))


def localized_exports(ctx: FailFn, exports: ExportsSpec | None, suites: Sequence[Any]) -> ExportsSpec | None:
    """The builds whose model a suite localizes (`localize: true`) build their debug program too;
    one without `debug_args` is a plan error at that suite's key: the stage could not build it."""
    if exports is None:
        return None
    wanted: set[str] = set()
    for suite in suites:
        for model in suite.models if suite.localize else ():
            build = exports.build_of(model)
            if build is None:
                continue
            if not build.debug_args:
                raise ctx.fail(f"suites.{suite.name}.localize",
                               f"localizes {model!r}, but its export ({build.label}) has no `debug_args`, so the "
                               "export stage cannot build its debug program",
                               f"add the exporter's debug arguments to {build.label} (debug_args: [--debug-program]; "
                               "docs/exports.md#debug-builds) or drop `localize: true`")
            wanted.add(model)
    return exports.with_debug(wanted) if wanted else exports
