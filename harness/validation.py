"""Typed lookups for declarative YAML files (devices.yaml, nightly plans). Each failure goes
through the caller's `fail(key, problem, fix)`, so the message names the file (and device)."""

from __future__ import annotations

import re
from typing import Any, Protocol

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # POSIX shell variable names


class FailFn(Protocol):
    def fail(self, key: str | None, problem: str, fix: str) -> Exception: ...


def type_name(value: Any) -> str:
    return {dict: "mapping", list: "list", str: "string", int: "integer", float: "number",
            bool: "boolean", type(None): "empty value"}.get(type(value), type(value).__name__)


def check_keys(ctx: FailFn, prefix: str, data: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        key = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise ctx.fail(key, "is not a known key", f"use only {', '.join(sorted(allowed))}")


def typed_get(ctx: FailFn, data: dict[str, Any], key: str, kind: type | tuple[type, ...], *, label: str | None = None,
              default: Any = None, required: bool = False, missing_fix: str | None = None) -> Any:
    """data[key] checked against `kind`; YAML booleans are ints in Python, never accepted as one."""
    label = label or key
    if key not in data or data[key] is None:
        if required:
            raise ctx.fail(label, "is missing", missing_fix or f"add `{key}:`")
        return default
    value = data[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        expected = " or ".join(type_name(k()) for k in kinds)
        raise ctx.fail(label, f"must be a {expected}, got {type_name(value)} {value!r}", f"write it as a {expected}")
    return value


def parse_host_port(ctx: FailFn, key: str, text: str, default_port: int) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ctx.fail(key, f"{text!r} is not HOST:PORT", "write it like 127.0.0.1:5037")
    return host, int(port)


def check_env_var(ctx: FailFn, label: str, name: Any, value: Any) -> None:
    """One entry of an `env:` mapping (`label` is the mapping's key): a shell variable name
    and a string or number value."""
    if not isinstance(name, str) or not _ENV_NAME_RE.match(name):
        raise ctx.fail(label, f"{name!r} is not a valid environment variable name",
                       "use letters, digits and '_', not starting with a digit")
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ctx.fail(f"{label}.{name}", f"must be a string or number, got {type_name(value)}",
                       "quote the value")
