"""Where a QNN cell's program runs its work, judged (docs/placement.md): read from the program
(harness.qnn.placement), the ops on the CPU beyond what the suite expects fail the cell as
`cpu-fallback`, naming them; every cell carries its placement and provenance (tier, QAIRT, sha256).

Speed is no signal on the host (the x86 CPU outruns the emulated HTP), so the program decides."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from harness.evidence import PlacementEvidence, Provenance, counted
from harness.inventory import DeviceSpec
from harness.outcomes import FailureClass
from harness.provision import default_cache
from harness.qnn import context_binaries, read_placement
from harness.report import TestRecord
from harness.runners.executorch import ArtifactKind
from harness.verdict import Verdict

# A runner-ready KV program casts its causal mask from bool to float once, a Cast QNN refuses
# (docs/placement.md#expected-cpu-ops); nothing else of a QNN program belongs on the CPU.
_KV_MASK_CAST: Mapping[str, int] = MappingProxyType({"dim_order_ops::_to_dim_order_copy": 1})
EXPECTED_CPU_OPS: Mapping[ArtifactKind, Mapping[str, int]] = MappingProxyType({
    ArtifactKind.LLM: _KV_MASK_CAST, ArtifactKind.EXPORT: _KV_MASK_CAST, ArtifactKind.FORWARD: MappingProxyType({})})


def judge_placement(pte: Path, expected: Mapping[str, int], rec: TestRecord) -> Verdict | None:
    """The program's placement on the record; a failed verdict when ops beyond `expected` run
    on the CPU (or no QNN delegate at all), None when it runs where it should."""
    placement = read_placement(pte)
    over = placement.unexpected(expected)
    rec.put(PlacementEvidence(pte.name, placement, dict(expected), over))
    if not placement.on_npu:
        return Verdict.failed(FailureClass.CPU_FALLBACK, f"{pte.name}: no QnnBackend delegate, everything runs on "
                              f"the CPU ({placement.describe()}); lower it with ExecuTorch's QNN partitioner")
    if over:
        return Verdict.failed(FailureClass.CPU_FALLBACK, f"{pte.name}: ops on the CPU beyond those expected: {counted(over)} "
                              f"({placement.describe()}); lower them to QNN (the partitioner's skip lists, QNN's "
                              "op support for this SoC) or list them as expected (--expect-cpu-ops, a plan suite's "
                              "expected_cpu_ops)")
    return None


def stamp_provenance(rec: TestRecord, device: DeviceSpec, pte: Path | None, qairt: str | None) -> None:
    """Tier, the runtime's QAIRT build and the sha256 of the program and of its context binaries."""
    program = None
    if pte is not None:
        hashes = default_cache()  # a multi-GB program is hashed once per version, as a push does
        program = hashes.digest(pte)
        hashes.save()
    bins = tuple(hashlib.sha256(blob).hexdigest() for _, blob in context_binaries(pte)) if pte is not None else ()
    rec.put(Provenance(device.tier, qairt if device.has_htp else None, program, bins))


__all__ = ["EXPECTED_CPU_OPS", "judge_placement", "stamp_provenance"]
