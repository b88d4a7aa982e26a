"""Typed lookups for declarative YAML files (devices.yaml, nightly plans). Each failure goes
through the caller's `fail(key, problem, fix)`, so the message names the file (and device)."""

from __future__ import annotations

import gc
import re
import reprlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

import yaml

# Aliases may add this many values beyond those written in the file: a real devices.yaml or
# plan repeats a block a few times; a "billion laughs" of 1 KB expands to 10^9.
MAX_ALIAS_VALUES = 100_000
_SHOWN_MAX = 160
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # POSIX shell variable names


def _repr_cut() -> reprlib.Repr:
    r = reprlib.Repr()  # keyword arguments only from Python 3.12
    r.maxlevel, r.maxdict, r.maxlist, r.maxtuple, r.maxset = 2, 4, 4, 4, 4
    r.maxstring, r.maxother, r.maxlong = 60, 60, 40
    return r


class YamlBoundError(ValueError):
    """A YAML file whose aliases expand beyond MAX_ALIAS_VALUES, or nested too deep to read."""


def shown(value: object) -> str:
    """`value` as a message shows it: cut (at most a few items a level, 60 characters a string)."""
    text = _repr_cut().repr(value)
    return text if len(text) <= _SHOWN_MAX else text[:_SHOWN_MAX - 3] + "..."


def _expanded_size(root: yaml.Node) -> tuple[int, int]:
    """(values written, values after alias expansion): each node counted once per reference,
    each distinct node's size computed once, so a bomb is measured without expanding it."""
    sizes: dict[int, int] = {}
    order, stack = [], [root]
    while stack:  # children before parents, without recursion (a deep file must not overflow)
        node = stack.pop()
        if id(node) in sizes:
            continue
        sizes[id(node)] = 0
        order.append(node)
        stack.extend(_children(node))
    for node in reversed(order):
        sizes[id(node)] = 1 + sum(sizes[id(c)] for c in _children(node))
    return len(order), sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


@contextmanager
def no_gc_pauses() -> Iterator[None]:
    """The cyclic collector paused while a file's values are made: reading builds a tree of
    new objects and frees them by their counts, yet each few hundred allocations set off a
    collection walking every object of the process (numpy's, the suites' registries...): half
    of a 10 000-device devices.yaml's reading (docs/lab-scale.md). Left off if a caller had it off."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_yaml(text: str) -> Any:
    """A YAML document, its aliases bounded before anything walks it (libyaml's safe loader
    where PyYAML has it). YamlBoundError for a bomb; yaml.YAMLError for bad syntax."""
    with no_gc_pauses():
        return _load_yaml(text)


def _load_yaml(text: str) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        # Without an anchor (`&`) there is no alias to expand: the walk below was 15% of
        # reading a 10 000-device devices.yaml (docs/lab-scale.md).
        written, expanded = _expanded_size(node) if "&" in text else (0, 0)
        if expanded - written > MAX_ALIAS_VALUES:
            raise YamlBoundError(f"its aliases expand to {expanded} values from {written} written (at most "
                                 f"{MAX_ALIAS_VALUES} more are read): an alias bomb? write the values out")
        return loader.construct_document(node)
    except RecursionError:
        raise YamlBoundError("it is nested too deep to read; flatten it") from None
    finally:
        loader.dispose()


class FailFn(Protocol):
    def fail(self, key: str | None, problem: str, fix: str) -> Exception: ...


def type_name(value: object) -> str:
    return {dict: "mapping", list: "list", str: "string", int: "integer", float: "number",
            bool: "boolean", type(None): "empty value"}.get(type(value), type(value).__name__)


def check_keys(ctx: FailFn, prefix: str, data: Mapping[str, object], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        key = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise ctx.fail(key, "is not a known key", f"use only {', '.join(sorted(allowed))}")


def typed_get(ctx: FailFn, data: Mapping[str, object], key: str, kind: type | tuple[type, ...], *, label: str | None = None,
              default: object = None, required: bool = False, missing_fix: str | None = None) -> Any:
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
        article = "an" if expected[0] in "aeiou" else "a"  # "an integer", "a mapping"
        raise ctx.fail(label, f"must be {article} {expected}, got {type_name(value)} {shown(value)}",
                       f"write it as {article} {expected}")
    return value


def parse_host_port(ctx: FailFn, key: str, text: str, default_port: int) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ctx.fail(key, f"{shown(text)} is not HOST:PORT", "write it like 127.0.0.1:5037")
    return host, int(port)


def check_env_var(ctx: FailFn, label: str, name: object, value: object) -> None:
    """One entry of an `env:` mapping (`label` is the mapping's key): a shell variable name
    and a string or number value."""
    if not isinstance(name, str) or not _ENV_NAME_RE.match(name):
        raise ctx.fail(label, f"{shown(name)} is not a valid environment variable name",
                       "use letters, digits and '_', not starting with a digit")
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ctx.fail(f"{label}.{name}", f"must be a string or number, got {type_name(value)}",
                       "quote the value")
