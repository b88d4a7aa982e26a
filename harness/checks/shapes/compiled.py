"""The compiled QNN IO (harness.qnn.compiled_io) against what the model needs (llm_config.json
keys, never the folder name: upstream `generate_llm_qnn.py` keys on the *path string*, so a
folder without "Qwen" and "VL" gets `position_ids [1,seq]` and no deepstack input).

- mRoPE models (`is_mrope` / `mrope_axes` / a Qwen-VL model_type) need `position_ids [3,seq]`.
- Deepstack models (`has_deepstack`, Qwen3-VL) need `deepstack_embeds [3,chunk,hidden]` for
  prefill and `[3,1,hidden]` for decode, never upstream's placeholder `[3,1,1]`.
- `chunk_limits` must be present for a QNN LLM, its largest entry must equal the compiled chunk
  size, and every entry must be a compiled sequence length.
- Every context binary the stub names is in `qnn/`, and no `graph*.bin` is left over.
- soc_id / dsp_arch come from the context binaries (SDK) or the sidecar, else are unknown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checks.shapes.findings import ERROR, WARNING, ShapeKind, shape_finding
from harness.export import SIDECAR_PATH
from harness.findings import Finding, Severity
from harness.qnn.compiled_io import SOURCE_SIDECAR, SOURCE_UNKNOWN, CompiledIO, StubIO, binary_files
from harness.soc import lookup_id, normalize_arch

DEEPSTACK_LAYERS = 3  # Qwen3-VL deepstack_visual_indexes [5, 11, 17]
MROPE_MODEL_TYPES = {"qwen2_vl", "qwen2_5_vl", "qwen2_5_omni", "qwen3_vl", "qwen3_vl_moe"}
DEEPSTACK_MODEL_TYPES = {"qwen3_vl", "qwen3_vl_moe"}


@dataclass(frozen=True)
class ModelNeeds:
    model_type: str
    hidden: int | None
    mrope: bool
    deepstack: bool
    visual: bool


def model_needs(llm_config: Mapping[str, object]) -> ModelNeeds:
    mt = str(llm_config.get("model_type", ""))
    hidden = llm_config.get("hidden_size")
    mrope = bool(llm_config.get("is_mrope")) or llm_config.get("mrope_axes") == 3 or mt in MROPE_MODEL_TYPES
    deepstack = bool(llm_config.get("has_deepstack", mt in DEEPSTACK_MODEL_TYPES))
    return ModelNeeds(mt, hidden if isinstance(hidden, int) else None, mrope, deepstack,
                  bool(llm_config.get("is_visual")))


def graph_inputs(io_cfg: dict[str, Any]) -> dict[str, list[int]]:
    out = {}
    for inp in io_cfg.get("inputs", []):
        if isinstance(inp, dict) and "name" in inp:
            out[str(inp["name"])] = list(inp.get("shape", []))
    return out


def fmt_shape(shape: Sequence[object] | None) -> str:
    return "absent" if shape is None else "[" + ",".join(str(x) for x in shape) + "]"


def check_llm_io(model: ModelNeeds, configs: Sequence[dict[str, Any]], rel: str, source: str
                  ) -> tuple[list[Finding], set[int]]:
    """Compiled LLM IO vs the model's needs. Returns findings and the compiled seq lengths."""
    findings: list[Finding] = []
    seqs: set[int] = set()

    def add(kind: ShapeKind, file: str, key: str, expected: str, found: str, hint: str,
            severity: Severity = ERROR) -> None:
        findings.append(shape_finding(kind, file, key, expected, found, hint, severity, source=source))

    for n, cfg in enumerate(configs):
        ins = graph_inputs(cfg)
        ids = ins.get("input_ids")
        if not ids or len(ids) != 3:
            add(ShapeKind.IO_SHAPE, rel, f"shape {n} input_ids", "[seq,1,hidden]", fmt_shape(ids),
                "regenerate the QNN export with generate_llm_qnn.py (--seperate_embed exports feed "
                "input_ids as embeddings [seq,1,hidden])")
            continue
        seq = int(ids[0])
        seqs.add(seq)
        phase = "decode" if seq == 1 else f"prefill (seq {seq})"
        where = f"shape {n} ({phase})"
        if model.hidden is not None and ids[2] != model.hidden:
            add(ShapeKind.HIDDEN_MISMATCH, rel, f"{where} input_ids", f"[{seq},1,{model.hidden}] "
                f"(llm_config.json hidden_size)", fmt_shape(ids),
                "the QNN graphs were compiled from a different model; re-run generate_llm_qnn.py "
                "on this export")
        pos = ins.get("position_ids")
        want_axes = 3 if model.mrope else 1
        if pos is not None and pos != [want_axes, seq]:
            hint = ("llm_config.json says this is an mRoPE model; upstream generate_llm_qnn.py only "
                    "compiles position_ids [3,seq] when the --model path contains 'Qwen' and 'VL' - "
                    "rename the export folder accordingly and re-run it") if model.mrope else (
                    "this model uses 1-D positions; re-run generate_llm_qnn.py from a folder whose "
                    "name does not contain 'VL'/'Qwen3.5'")
            add(ShapeKind.POSITION_IDS_SHAPE, rel, f"{where} position_ids", f"[{want_axes},{seq}]", fmt_shape(pos), hint)
        ds = ins.get("deepstack_embeds")
        if model.deepstack:
            want = [DEEPSTACK_LAYERS, seq, model.hidden if model.hidden is not None else "hidden"]
            if ds is None:
                add(ShapeKind.DEEPSTACK_MISSING, rel, f"{where} deepstack_embeds", fmt_shape(want), "absent",
                    "Qwen3-VL feeds deepstack_embeds to the LLM; compile it as an input")
            elif ds == [3, 1, 1]:
                add(ShapeKind.DEEPSTACK_PLACEHOLDER, rel, f"{where} deepstack_embeds", fmt_shape(want),
                    "[3,1,1] (upstream placeholder)",
                    "upstream makeIOJson compiles deepstack_embeds as [3,1,1]; the runtime sends "
                    f"[3,{seq},hidden] and QNN fails with 'MNN_QNN: Failed to compute shape for "
                    "Plugin Op.' - patch makeIOJson to [3,seq,hidden] and re-run generate_llm_qnn.py")
            elif model.hidden is not None and ds != want:
                add(ShapeKind.DEEPSTACK_SHAPE, rel, f"{where} deepstack_embeds", fmt_shape(want), fmt_shape(ds),
                    "recompile with deepstack_embeds [3,seq,hidden] for prefill and [3,1,hidden] "
                    "for decode")
        elif ds is not None:
            add(ShapeKind.DEEPSTACK_UNEXPECTED, rel, f"{where} deepstack_embeds", "absent "
                f"(llm_config.json model_type {model.model_type!r} has no deepstack)", fmt_shape(ds),
                "the runtime will not feed this input ('can't find input'); upstream adds it to "
                "every 'Qwen'+'VL' path - recompile without it", severity=WARNING)
    if model.mrope and seqs and not any("position_ids" in graph_inputs(c) for c in configs):
        add(ShapeKind.POSITION_IDS_SHAPE, rel, "position_ids", "[3,seq] compiled into a graph", "absent",
            "no context binary takes position_ids; re-run generate_llm_qnn.py")
    return findings, seqs


def check_binaries(stub: StubIO, kind: str, root: Path, npu_dir: Path) -> list[Finding]:
    """Every context binary the stub names is in qnn/, and no graph<kind>N.bin is left over."""
    named = [b.path for b in stub.binaries]
    if not named:
        return []
    have = binary_files(root, npu_dir)[kind]
    out = []
    missing = [p for p in named if not (npu_dir / p).is_file()]
    if missing:
        out.append(shape_finding(
            ShapeKind.MISSING_BINARY, stub.path, "context binaries", f"{len(named)} named by {stub.path}",
            f"{len(missing)} missing: " + ", ".join(missing),
            "the QNN plugin fails to load them; copy the whole qnn/ folder from generate_llm_qnn.py's "
            "output (npu_convert.py writes one graph<kind><N>.bin per NPU segment)".replace("<kind>", kind),
            source=stub.source))
    extra = [p for p in have if p not in named]
    if extra:
        out.append(shape_finding(
            ShapeKind.LEFTOVER_BINARY, stub.path, "context binaries", f"only the {len(named)} named by {stub.path}",
            f"{len(extra)} more: " + ", ".join(extra),
            "left over from an older compile: delete qnn/ and copy it whole from the latest "
            "generate_llm_qnn.py output", source=stub.source))
    return out


def check_chunks(cfg: Mapping[str, object], rel: str, stub: StubIO, sidecar: Mapping[str, object] | None, seqs: set[int]) -> list[Finding]:
    limits = cfg.get("chunk_limits")
    recorded = sidecar.get("chunk_size") if sidecar else None
    prefill = max((s for s in seqs if s > 1), default=None)
    want = f"[{prefill}, 1]" if prefill else "[chunk_size, 1]"
    if limits is None:
        return [shape_finding(ShapeKind.CHUNK_LIMITS, rel, "chunk_limits", want, "absent",
                             "a QNN LLM needs chunk_limits naming its compiled sequence lengths")]
    if not isinstance(limits, list) or len(limits) < 2 or not all(isinstance(x, int) for x in limits):
        return [shape_finding(ShapeKind.CHUNK_LIMITS, rel, "chunk_limits", want, json.dumps(limits),
                             "the runtime rejects it: 'size_limit must be array larger than 1, "
                             "eg: [128, 1]'")]
    out = []
    if isinstance(recorded, int) and prefill and recorded != prefill:
        out.append(shape_finding(ShapeKind.CHUNK_SIZE, SIDECAR_PATH, "chunk_size", f"{prefill} (compiled "
                                f"input_ids seq in {stub.path})", str(recorded), "regenerate the sidecar",
                                source=SOURCE_SIDECAR))
    if prefill and max(limits) != prefill:
        out.append(shape_finding(
            ShapeKind.CHUNK_MISMATCH, rel, "chunk_limits", want, json.dumps(limits),
            f"{stub.path} was compiled for chunk {prefill} but chunk_limits asks for {max(limits)}; "
            f"set chunk_limits to [{prefill}, 1] or recompile with --chunk_size {max(limits)}",
            source=stub.source))
    elif seqs:
        extra = sorted(set(limits) - seqs)
        if extra:
            out.append(shape_finding(
                ShapeKind.CHUNK_MISMATCH, rel, "chunk_limits", f"entries among compiled {sorted(seqs)}",
                json.dumps(limits), f"{stub.path} has no graph for {extra}: a remainder chunk is padded "
                "to these sizes and every one needs a compiled graph ('MNN_QNN: Failed to compute "
                "shape for Plugin Op.')", source=stub.source))
    return out


def check_target(io: CompiledIO, soc_id: int | None, dsp_arch: str | None) -> list[Finding]:
    t = io.target
    where = SIDECAR_PATH if t.source == SOURCE_SIDECAR else "qnn/graph*.bin"
    out = []
    if t.source == SOURCE_UNKNOWN:
        if soc_id is not None or dsp_arch is not None:
            out.append(shape_finding(
                ShapeKind.TARGET_UNKNOWN, "qnn/graph*.bin", "soc_id/dsp_arch", f"soc_id {soc_id}, {dsp_arch}",
                "unknown", "the export records no target: install the host's QAIRT libraries (pip install "
                "'harness[qnn]': libQnnSystem reads the context binaries), pass --qnn-sdk "
                f"(qnn-context-binary-utility) or write soc_id/dsp_arch into {SIDECAR_PATH}",
                severity=WARNING, source=SOURCE_UNKNOWN))
        return out
    known = lookup_id(t.soc_id) if t.soc_id is not None else None
    if known is not None and t.dsp_arch is not None and t.dsp_arch != known.htp_arch:
        out.append(shape_finding(
            ShapeKind.TARGET_INCONSISTENT, where, "dsp_arch", f"{known.htp_arch} (soc_id {t.soc_id} "
            f"is {known.model})", t.dsp_arch,
            f"the binaries were built for an impossible soc/arch pair; re-run generate_llm_qnn.py "
            f"--soc_id {t.soc_id} --dsp_arch {known.htp_arch}", source=t.source))
    if soc_id is not None and t.soc_id is not None and t.soc_id != soc_id:
        out.append(shape_finding(ShapeKind.TARGET_MISMATCH, where, "soc_id", str(soc_id), str(t.soc_id),
                                "the context binaries fail with 'QNN: Failed to validate binary'; "
                                f"re-run generate_llm_qnn.py --soc_id {soc_id}", source=t.source))
    if dsp_arch is not None and t.dsp_arch is not None:
        want = normalize_arch(dsp_arch) or dsp_arch
        if t.dsp_arch != want:
            out.append(shape_finding(ShapeKind.TARGET_MISMATCH, where, "dsp_arch", want, t.dsp_arch,
                                    f"re-run generate_llm_qnn.py --dsp_arch {want}", source=t.source))
    return out


__all__ = [
    "DEEPSTACK_LAYERS", "DEEPSTACK_MODEL_TYPES", "MROPE_MODEL_TYPES", "ModelNeeds", "check_binaries", "check_chunks",
    "check_llm_io", "check_target", "fmt_shape", "graph_inputs", "model_needs",
]
