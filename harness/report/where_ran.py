"""Where a report cell's work ran (docs/placement.md), for the page, from its records' views
(harness.evidence: RanOn, Placed, TimedOn, whichever family gives them): the tier its records ran on
(a device's NPU, the host's HTP emulator, a CPU), the runtime's QAIRT build, and the placement
the checks read (delegates, ops on the CPU, the delegated share of time where an ETDump gave
one, the ops beyond those expected that made it `cpu-fallback`). So a CPU or emulator pass is
never read as the NPU's at a glance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.evidence import Placed, RanOn, Tier, TimedOn
from harness.report.records import TestRecord

# What each tier is called on the page, strongest claim first (a cell of mixed tiers shows each).
TIER_LABEL = {Tier.NPU: "NPU", Tier.EMULATOR: "HTP emulator", Tier.CPU: "CPU"}


@dataclass(frozen=True)
class TierBadge:
    tier: str  # npu | emulator | cpu: the CSS class
    label: str


@dataclass(frozen=True)
class WhereRan:
    tiers: tuple[TierBadge, ...]
    qairt: str  # the runtime's QAIRT build(s), "" when none was read
    placement: str  # "QnnBackend x1; nothing on the CPU", "" when no check read it
    share: str  # "delegated 97.0% of op time" (ETDump), "" without one
    fallback: str  # why it is `cpu-fallback` ("on the CPU beyond those expected: aten::relu.out x1"), or ""
    runtime: str = ""  # llm_demo's own word: "llm_demo: 32 QNN plugin inits", "" when not read

    @property
    def empty(self) -> bool:
        return not (self.tiers or self.qairt or self.placement)


def timing_label(rec: TestRecord) -> str:
    """" (emulator)" after a time measured on an emulated HTP (not device speed), else ""."""
    timed = rec.evidence.views(TimedOn)
    return f" ({timed[0].label})" if timed else ""


def where_ran(recs: Sequence[TestRecord]) -> WhereRan:
    """The tiers, QAIRT builds and placement of a cell's records (each family's views: the first
    record that carries a placement speaks for it; its program is the cell's)."""
    ran = [v for r in recs for v in r.evidence.views(RanOn)]
    tiers = tuple(TierBadge(t.value, TIER_LABEL[t]) for t in Tier if any(v.tier is t for v in ran))
    qairt = ", ".join(dict.fromkeys(v.qairt for v in ran if v.qairt))
    placed = next((v for r in recs for v in r.evidence.views(Placed)), Placed(""))
    return WhereRan(tiers, qairt, placed.placement, placed.share, placed.fallback, placed.runtime)


__all__ = ["TIER_LABEL", "TierBadge", "WhereRan", "timing_label", "where_ran"]
