"""The verdict over compared ops: the FIRST op in graph order under the format's threshold (not the
worst: the ops after a fault can be worse than the fault itself). Thresholds are calibrated on real
lowerings (docs/localize.md#calibration)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.evidence import Localization, OpGap, Outcome

# dB SQNR per activation/weight format, calibrated on real lowerings (docs/localize.md#calibration):
# 16-bit activations' healthy floors 40-62 dB on random weights, planted faults 3-4 dB; 8a8w's healthy
# softmax is at 13-15 dB, its faults at 3-4 dB. On real trained weights 4-bit weights cost more per
# op: SmolLM2-135M's first 2 layers (export_llm, 16a4w) have a healthy floor of 17 dB, the seed
# fault 3 dB (docs/etllama.md#measured), so 16a4w's line sits between them. 16a16w is not measured:
# 16-bit activations' value.
THRESHOLD_DB: dict[str, float] = {"16a4w": 10.0, "16a8w": 20.0, "8a8w": 8.0, "16a16w": 20.0}
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
