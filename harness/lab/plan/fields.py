"""Reading one value of a plan (harness/lab/plan/load.py): the load's context, whose `fail` makes
the PlanError naming the file and the key, and the typed readers every section uses."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.lab.plan.specs import PlanError
from harness.validation import check_keys, shown, typed_get


class PlanCtx:
    def __init__(self, path: Path, environ: Mapping[str, str]):
        self.path = path
        self.environ = environ

    def fail(self, key: str | None, problem: str, fix: str) -> PlanError:
        where = f"{self.path}" + (f": key {key!r}" if key else "")
        return PlanError(f"{where}: {problem}; {fix}")


def get_value(ctx: PlanCtx, data: Mapping[str, object], key: str, kind: type | tuple[type, ...], label: str, default: object = None,
              required: bool = False) -> Any:
    return typed_get(ctx, data, key, kind, label=label, default=default, required=required)


def check_positive(ctx: PlanCtx, label: str, value: float | int, *, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise ctx.fail(label, f"{value} must be {'zero or ' if allow_zero else ''}positive",
                       "give a number above zero")


def read_names(ctx: PlanCtx, data: Mapping[str, object], key: str, label: str) -> tuple[str, ...]:
    raw = get_value(ctx, data, key, (list, str), label, default=[])
    items = [raw] if isinstance(raw, str) else raw
    for item in items:
        if not isinstance(item, str) or not item:
            raise ctx.fail(label, f"holds {shown(item)}", "list non-empty names")
    return tuple(items)


def read_section(ctx: PlanCtx, data: Mapping[str, object], key: str, allowed: set[str]) -> dict[str, object]:
    raw: dict[str, object] = get_value(ctx, data, key, dict, key, default={})
    check_keys(ctx, key, raw, allowed)
    return raw


def read_number(ctx: PlanCtx, sec: Mapping[str, object], key: str, label: str, default: float, *, integer: bool = False,
                allow_zero: bool = False) -> Any:
    value = get_value(ctx, sec, key, int if integer else (int, float), label, default=default)
    check_positive(ctx, label, value, allow_zero=allow_zero)
    return value
