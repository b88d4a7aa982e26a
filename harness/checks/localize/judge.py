"""The verdict over compared ops: the FIRST op in graph order under the format's threshold (not the
worst: the ops after a fault can be worse than the fault itself). Thresholds are calibrated on real
lowerings (docs/localize.md#calibration)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.evidence import Localization, OpGap, Outcome

# dB SQNR per activation/weight format, calibrated on real lowerings (docs/localize.md#calibration,
# docs/executorch-reference.md#calibration): planted faults at 2.6-3.9 dB in every format (a milder
# form of the seed's at 16a8w: 9.9 dB). Healthy floors on trained weights (SmolLM2) sit far under
# random weights': 16a8w 20.1 dB through export_llm (40-62 dB random), hence 12 dB; 16a4w 12.3 dB
# (35-43 dB random; 4-bit weights under its outliers), hence 10 dB; 8a8w 7.2 dB (13-15 dB random; its
# V slice under the fused QKV's shared 8-bit range), hence 5.5 dB. 16a16w is not measured: never
# stricter than 16a8w. A format not calibrated gets the most lenient line: a healthy program must
# never fail as a fault for want of calibration.
THRESHOLD_DB: dict[str, float] = {"16a4w": 10.0, "16a8w": 12.0, "8a8w": 5.5, "16a16w": 12.0}
DEFAULT_THRESHOLD_DB = min(THRESHOLD_DB.values())
FOLLOWING = 5  # ops shown after the first departure


def threshold_for(fmt: str) -> float:
    return THRESHOLD_DB.get(fmt, DEFAULT_THRESHOLD_DB)


def judge(ops: Sequence[OpGap], fmt: str, threshold_db: float | None = None) -> Localization:
    limit = threshold_for(fmt) if threshold_db is None else threshold_db
    ordered = tuple(sorted(ops, key=lambda o: o.index))
    if not any(o.judged for o in ordered):
        return Localization(Outcome.UNDECIDABLE, limit, fmt, ordered,
                            reason="no quantized QNN op of the program matched the CPU reference graph")
    for i, op in enumerate(ordered):
        if op.judged and op.sqnr_db < limit:
            return Localization(Outcome.DEPARTED, limit, fmt, ordered, first=op,
                                following=tuple(o for o in ordered[i + 1:] if o.judged)[:FOLLOWING])
    return Localization(Outcome.NONE, limit, fmt, ordered)
