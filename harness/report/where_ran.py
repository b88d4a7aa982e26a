"""Where a report cell's work ran (docs/placement.md), for the page: the tier its records ran on
(a device's NPU, the host's HTP emulator, a CPU), the runtime's QAIRT build, and the placement
the checks read (delegates, ops on the CPU, the delegated share of time where an ETDump gave
one, the ops beyond those expected that made it `cpu-fallback`). So a CPU or emulator pass is
never read as the NPU's at a glance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.evidence import PlacementEvidence, Provenance, Tier, Timing, counted
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
    timing = rec.evidence.get(Timing)
    return " (emulator)" if timing is not None and timing.emulated else ""


def where_ran(recs: Sequence[TestRecord]) -> WhereRan:
    """The tiers, QAIRT builds and placement of a cell's records (the first record that carries
    a placement speaks for it; its program is the cell's)."""
    provs = [prov for r in recs if (prov := r.evidence.get(Provenance)) is not None]
    tiers = tuple(TierBadge(t.value, TIER_LABEL[t]) for t in Tier if any(p.tier is t for p in provs))
    qairt = ", ".join(dict.fromkeys(p.qairt for p in provs if p.qairt))
    placed = next((ev for r in recs if (ev := r.evidence.get(PlacementEvidence)) is not None), None)
    if placed is None:
        return WhereRan(tiers, qairt, "", "", "")
    share = ""
    if placed.time_share and placed.time_share.get("delegated") is not None:
        share = f"delegated {placed.time_share['delegated'] * 100:.1f}% of op time (ETDump)"
    beyond = counted(placed.unexpected)
    fallback = ("no QNN delegate: everything ran on the CPU" if not placed.placement.on_npu
                else f"on the CPU beyond those expected: {beyond}" if beyond else "")
    runtime = f"llm_demo: {placed.runtime_qnn_inits} QNN plugin inits" if placed.runtime_qnn_inits is not None else ""
    return WhereRan(tiers, qairt, f"{placed.program}: {placed.summary}", share, fallback, runtime)


__all__ = ["TIER_LABEL", "TierBadge", "WhereRan", "timing_label", "where_ran"]
