"""Where an MNN QNN cell's work ran, judged (docs/placement.md#llm_demo-mnn): the graphs its config
runs on QNN (the NPU stubs `qnn/llm.mnn`, `qnn/visual.mnn`) read for their QNN Plugin ops and the
ops outside them (harness.qnn.placement), with what llm_demo printed of the QNN kernels it
created. Ops on the CPU beyond those expected, or a stub with no QNN Plugin op at all (a CPU
graph under `qnn/`), fail the cell as `cpu-fallback`, naming them; a pass carries its placement.

llm_demo's timing block is the same on the CPU and the NPU, and speed is no signal on the host,
so the export decides; the runtime's `stateNumber=` lines confirm where it printed them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.evidence import Placement, PlacementEvidence, Provenance, counted, with_expected
from harness.export import open_export
from harness.outcomes import FailureClass
from harness.pairs import BackendPair, path_on_qnn
from harness.provision import default_cache
from harness.qnn import convert_log_of, qnn_plugin_inits, read_npu_log, read_stub_placement
from harness.report import TestRecord
from harness.verdict import Verdict

# compilefornpu keeps each KV-cache Attention on the CPU (`_npuSupportOp`: a break op unless
# KVCACHE_SIZE_LIMIT > 0), one per layer, and the logits' StridedSlice by `logits_index`
# after the last graph (the real SmolLM2 stub: Attention x30, StridedSlice x1).
STUB_SLICE_OPS: Mapping[str, int] = {"StridedSlice": 1}


def stub_graphs(export: Path, config_name: str) -> tuple[str, ...]:
    """The graphs a config runs on QNN (its `llm_model` / `visual_model` under `qnn/`)."""
    data = open_export(export).config(config_name).data
    return tuple(str(data[k]) for k in ("llm_model", "visual_model")
                 if isinstance(data.get(k), str) and path_on_qnn(str(data[k])))


def default_stub_cpu_ops(export: Path, graphs: tuple[str, ...]) -> dict[str, int]:
    """What the MNN suites expect outside QNN by default: the LLM stub's KV Attention per layer
    (llm_config.json `layer_nums`) and its logits slice; nothing for a visual stub."""
    if not any(Path(g).name.startswith("llm") for g in graphs):
        return {}
    layers = open_export(export).llm_config.get("layer_nums")
    return {"Attention": int(layers) if isinstance(layers, int) else 0, **STUB_SLICE_OPS}


def judge_mnn_placement(export: Path, pair: BackendPair, config_name: str, rec: TestRecord, output: str,
                        extra: Mapping[str, int] | None = None) -> Verdict | None:
    """The QNN pair's placement on the record; a failed verdict when a graph it runs on QNN has
    no QNN Plugin op, or ops beyond those expected (`default_stub_cpu_ops`, a user's `extra`
    taking precedence per op) run on the CPU. `output`: the cell's llm_demo stdout and logcat."""
    graphs = stub_graphs(export, config_name)
    placement = Placement(tuple(m for g in graphs for m in read_stub_placement(export / g, name=g).methods))
    allowed = with_expected(default_stub_cpu_ops(export, graphs), extra)
    over = placement.unexpected(allowed)
    inits = qnn_plugin_inits(output)
    rec.put(PlacementEvidence(", ".join(graphs) or config_name, placement, allowed, over,
                              runtime_qnn_inits=inits))
    npu_log = read_npu_log(output, convert_log_of(export))  # MNN's own words: what it left to the CPU, why
    rec.put(npu_log)
    said = (f"llm_demo printed {inits} QNN plugin init lines" if inits
            else "llm_demo printed no QNN plugin init line")
    bare = [m.method for m in placement.methods if not dict(m.delegates)]
    if not graphs or bare:
        what = ", ".join(bare) or f"{config_name} names no graph under qnn/"
        return Verdict.failed(FailureClass.CPU_FALLBACK, f"{pair}: {what}: no QNN Plugin op, everything runs on "
                              f"the CPU ({placement.describe()}; {said}); compile it for the NPU with MNN's "
                              "npu/generate_llm_qnn.py")
    mnn_said = f"; MNN says: {npu_log.describe_fallbacks()}" if npu_log.fallbacks else ""
    if over:
        return Verdict.failed(FailureClass.CPU_FALLBACK, f"{pair}: ops on the CPU beyond those expected: {counted(over)} "
                              f"({placement.describe()}; {said}){mnn_said}; leave them out of compilefornpu's `skips`, "
                              "or list them as expected (--expect-cpu-ops, a plan suite's expected_cpu_ops)")
    if npu_log.fallbacks:
        return Verdict.failed(FailureClass.CPU_FALLBACK, f"{pair}: MNN left work on the CPU: "
                              f"{npu_log.describe_fallbacks()} ({placement.describe()}; {said})")
    return None


def stamp_mnn_provenance(rec: TestRecord, export: Path, config_name: str, qairt: str | None) -> None:
    """The record's tier (put by the door) with the runtime's QAIRT build, the sha256 of the
    stub the config runs (its LLM's, else its visual's) and of each context binary of `qnn/`."""
    had = rec.evidence.get(Provenance)
    if had is None:
        return
    graphs = stub_graphs(export, config_name)
    hashes = default_cache()  # multi-GB binaries are hashed once per version, as a push does
    program = hashes.digest(export / graphs[0]) if graphs and (export / graphs[0]).is_file() else None
    bins = tuple(hashes.digest(p) for p in sorted((export / "qnn").glob("*.bin")) if p.is_file())
    hashes.save()
    rec.put(Provenance(had.tier, qairt or had.qairt, program, bins))


__all__ = ["STUB_SLICE_OPS", "default_stub_cpu_ops", "judge_mnn_placement", "stamp_mnn_provenance", "stub_graphs"]
