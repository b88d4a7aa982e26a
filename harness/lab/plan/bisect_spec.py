"""A plan's `bisect:` (docs/bisect.md#in-the-night): after the suites and the reports, the night
bisects its new failures (a testcase that passed on the device's last night and fails tonight)
within a time budget, on a device reserved for it.

```yaml
bisect:
  axis: inputs            # inputs (the exports' recipe commits), runtime or qairt
  versions: [rt/V0, rt/V1, rt/V2, rt/V3]   # runtime / qairt: the folders, oldest first
  budget_s: 1800          # the whole bisection stage's time
  device: oneplus13-spare # where the steps run (default: the failing device); same SoC
  max_failures: 3         # at most this many new failures bisected a night
```"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.lab.plan.fields import PlanCtx, get_value, read_names, read_number, read_section

AXES = ("inputs", "runtime", "qairt")
_KEYS = {"axis", "versions", "budget_s", "device", "max_failures"}


@dataclass(frozen=True)
class NightBisect:
    axis: str
    versions: tuple[Path, ...] = ()
    budget_s: float = 1800.0
    device: str | None = None
    max_failures: int = 3


def parse_bisect(ctx: PlanCtx, data: dict[str, Any], base: Path) -> NightBisect | None:
    if "bisect" not in data:
        return None
    sec = read_section(ctx, data, "bisect", _KEYS)
    axis = get_value(ctx, sec, "axis", str, "bisect.axis", required=True)
    if axis not in AXES:
        raise ctx.fail("bisect.axis", f"{axis!r} is not an axis", f"write one of {', '.join(AXES)}")
    versions = tuple(base / Path(v).expanduser() for v in read_names(ctx, sec, "versions", "bisect.versions"))
    if axis != "inputs" and len(versions) < 2:
        raise ctx.fail("bisect.versions", f"the {axis} axis needs at least two folders, oldest first",
                       "list the runtime folders or SDK roots in order")
    for v in versions:
        if not v.is_dir():
            raise ctx.fail("bisect.versions", f"{v} is not a folder", "list existing folders (relative to the plan)")
    device = get_value(ctx, sec, "device", str, "bisect.device")
    return NightBisect(axis=axis, versions=versions,
                       budget_s=float(read_number(ctx, sec, "budget_s", "bisect.budget_s", NightBisect.budget_s)),
                       device=device,
                       max_failures=read_number(ctx, sec, "max_failures", "bisect.max_failures",
                                                NightBisect.max_failures, integer=True))
