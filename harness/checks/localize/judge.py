"""The verdict over compared ops: the FIRST op in graph order under the format's threshold (not the
worst: the ops after a fault can be worse than the fault itself). Thresholds are calibrated on real
lowerings (docs/localize.md#calibration)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.evidence import Localization, OpGap, Outcome

# dB SQNR per activation/weight format, calibrated on real lowerings (docs/localize.md#calibration,
# docs/executorch-reference.md#calibration): planted faults at 2.6-3.9 dB in every format. Healthy
# floors: 16a8w 40-62 dB (random weights); 16a4w 35-43 dB random but 17-18.4 dB on SmolLM2's trained
# weights (4-bit weights under its outliers; export_llm's and the example's lowering alike), hence
# 10 dB; 8a8w 13-15 dB random, 7.2 dB on SmolLM2 (its V slice under the fused QKV's shared 8-bit
# range), hence 5.5 dB. 16a16w is not measured: 16-bit activations' value.
THRESHOLD_DB: dict[str, float] = {"16a4w": 10.0, "16a8w": 20.0, "8a8w": 5.5, "16a16w": 20.0}
DEFAULT_THRESHOLD_DB = 20.0
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
