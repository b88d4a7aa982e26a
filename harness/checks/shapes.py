"""Shape guards for MNN/QNN exports: a static check of an export folder before a run and a scan
of the runtime log after it (mnn-llm.md §2 export layout, §4 error strings, §6 image sizes).

Static (`check_export_shapes`): the model's needs come from `llm_config.json` keys, never from
the folder name (upstream `generate_llm_qnn.py` keys on the *path string*: a folder without
"Qwen" and "VL" gets `position_ids [1,seq]` and no deepstack input). The compiled QNN IO comes
from the harness sidecar `qnn/export_manifest.json` (format documented in
`virtual_lab/exports.py`; upstream keeps no record of its arguments or IO json).

- mRoPE models (`is_mrope` / `mrope_axes` / a Qwen-VL model_type) need `position_ids [3,seq]`.
- Deepstack models (`has_deepstack`, Qwen3-VL) need `deepstack_embeds [3,chunk,hidden]` for
  prefill and `[3,1,hidden]` for decode, never upstream's placeholder `[3,1,1]`.
- A QNN visual graph must output both `image_embeds` and `deepstack_feature` (deepstack models).
- `chunk_limits` must be present for a QNN LLM, its largest entry must equal the compiled chunk
  size, and every entry must be a compiled sequence length.
- Image sizes: `--image_sizes` is `WxH` (**width first**); a prompt's `<hw>H, W</hw>` is
  **height first**. Both are compared on the resized patch grid the graph was compiled for.

Runtime (`scan_log_for_shape_errors`): the upstream shape/graph error strings plus the team's
own visual-output guards (`GUARD_*` below; upstream validates nothing, mnn-llm.md §4). A patched
runtime prints a guard as one line containing the constant, e.g.
`[Error]: visual output missing deepstack_feature: outputs=1`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from harness.checks.mrope import smart_resize
from harness.errors import ArtifactError
from harness.soc import lookup_id, normalize_arch

MANIFEST_PATH = "qnn/export_manifest.json"
DEEPSTACK_LAYERS = 3  # Qwen3-VL deepstack_visual_indexes [5, 11, 17]
MROPE_MODEL_TYPES = {"qwen2_vl", "qwen2_5_vl", "qwen2_5_omni", "qwen3_vl", "qwen3_vl_moe"}
DEEPSTACK_MODEL_TYPES = {"qwen3_vl", "qwen3_vl_moe"}

# The team's visual-output guard strings (printed by a patched runtime, matched as substrings).
GUARD_NO_IMAGE_EMBEDS = "visual output missing image_embeds"
GUARD_NO_DEEPSTACK = "visual output missing deepstack_feature"
GUARD_DEEPSTACK_SHAPE = "deepstack_embeds shape mismatch"
VISUAL_GUARDS = (GUARD_NO_IMAGE_EMBEDS, GUARD_NO_DEEPSTACK, GUARD_DEEPSTACK_SHAPE)

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class ShapeFinding:
    """One problem: where (file, key/tensor), expected vs found, and what to do."""

    kind: str
    file: str
    key: str
    expected: str
    found: str
    hint: str
    severity: str = ERROR
    line_no: int | None = None

    def explain(self) -> str:
        if self.line_no is not None:  # a log line: the matched text says it all
            text = f"[{self.severity}] {self.kind}: {self.file} line {self.line_no}: {self.key}"
        else:
            text = (f"[{self.severity}] {self.kind}: {self.file}: {self.key}: "
                    f"expected {self.expected}, found {self.found}")
        if self.hint:
            text += f"\n    what to do: {self.hint}"
        return text


def assert_shapes_ok(findings: Iterable[ShapeFinding], *, allow_warnings: bool = True) -> None:
    """Raise AssertionError explaining every error (and warning) finding."""
    findings = list(findings)
    bad = [f for f in findings if f.severity == ERROR or not allow_warnings]
    if not bad:
        return
    lines = [f"shape check failed: {len(bad)} problem(s)"]
    lines += [f.explain() for f in findings]
    raise AssertionError("\n".join(lines))


# --------------------------------------------------------------------------------------------
# Image sizes
# --------------------------------------------------------------------------------------------

_SIZE_RE = re.compile(r"\s*(\d+)\s*[xX]\s*(\d+)\s*")
_HW_RE = re.compile(r"<hw>(.*?)</hw>", re.S)
_IMG_RE = re.compile(r"<img>(.*?)</img>", re.S)


def parse_image_sizes(value: str | Sequence[Any]) -> list[tuple[int, int]]:
    """`--image_sizes` ("512x384,224x224": WIDTH x HEIGHT) -> [(w, h), ...]."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[tuple[int, int]] = []
    for item in items:
        if isinstance(item, str):
            if not item.strip():
                continue
            m = _SIZE_RE.fullmatch(item)
            if not m:
                raise ArtifactError(
                    f"image size {item!r} is not 'WxH' (width first, as --image_sizes takes it)"
                )
            out.append((int(m.group(1)), int(m.group(2))))
        else:
            w, h = item
            out.append((int(w), int(h)))
    return out


def parse_hw_tags(prompt: str) -> list[tuple[int, int] | None]:
    """One entry per `<img>` in a prompt: (height, width) from `<hw>H, W</hw>`, or None."""
    out: list[tuple[int, int] | None] = []
    for m in _IMG_RE.finditer(prompt):
        hw = _HW_RE.search(m.group(1))
        if not hw:
            out.append(None)
            continue
        parts = [p.strip() for p in hw.group(1).split(",")]
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ArtifactError(f"<hw>{hw.group(1)}</hw> must be '<hw>HEIGHT, WIDTH</hw>' (height first)")
        out.append((int(parts[0]), int(parts[1])))
    return out


def _qwen3_grid(w: int, h: int) -> tuple[int, int]:
    """(grid_h, grid_w) in patches the way makeVLIOJson compiles a (w, h) size (align 32, patch 16)."""
    return (round(h / 32) * 32) // 16, (round(w / 32) * 32) // 16


# --------------------------------------------------------------------------------------------
# Static export check
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Model:
    model_type: str
    hidden: int | None
    mrope: bool
    deepstack: bool
    visual: bool


def _read_json(path: Path, findings: list[ShapeFinding], root: Path) -> dict | None:
    rel = _rel(path, root)
    if not path.is_file():
        findings.append(ShapeFinding("missing_file", rel, "(file)", "present", "missing",
                                     "re-run the export or copy the file into the folder"))
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        findings.append(ShapeFinding("bad_json", rel, "(file)", "valid JSON", str(exc),
                                     "fix or regenerate the file"))
        return None
    if not isinstance(data, dict):
        findings.append(ShapeFinding("bad_json", rel, "(file)", "a JSON object", type(data).__name__,
                                     "fix or regenerate the file"))
        return None
    return data


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _model_from(llm_config: dict) -> _Model:
    mt = str(llm_config.get("model_type", ""))
    hidden = llm_config.get("hidden_size")
    mrope = bool(llm_config.get("is_mrope")) or llm_config.get("mrope_axes") == 3 or mt in MROPE_MODEL_TYPES
    deepstack = bool(llm_config.get("has_deepstack", mt in DEEPSTACK_MODEL_TYPES))
    return _Model(mt, hidden if isinstance(hidden, int) else None, mrope, deepstack,
                  bool(llm_config.get("is_visual")))


def _inputs(io_cfg: dict) -> dict[str, list[int]]:
    out = {}
    for inp in io_cfg.get("inputs", []):
        if isinstance(inp, dict) and "name" in inp:
            out[str(inp["name"])] = list(inp.get("shape", []))
    return out


def _fmt(shape: Sequence[Any] | None) -> str:
    return "absent" if shape is None else "[" + ",".join(str(x) for x in shape) + "]"


def _check_llm_io(model: _Model, manifest: dict, rel: str) -> tuple[list[ShapeFinding], set[int]]:
    """Compiled LLM IO vs the model's needs. Returns findings and the compiled seq lengths."""
    findings: list[ShapeFinding] = []
    configs = manifest.get("io", {}).get("llm", {}).get("configs")
    if not isinstance(configs, list) or not configs:
        findings.append(ShapeFinding("io_unknown", rel, "io.llm.configs", "the compiled LLM IO",
                                     "absent", "write the makeIOJson configs into the manifest"))
        return findings, set()
    seqs: set[int] = set()
    for n, cfg in enumerate(configs):
        ins = _inputs(cfg)
        ids = ins.get("input_ids")
        if not ids or len(ids) != 3:
            findings.append(ShapeFinding("io_shape", rel, f"io.llm.configs[{n}] input_ids",
                                         "[seq,1,hidden]", _fmt(ids),
                                         "regenerate the QNN export with generate_llm_qnn.py"))
            continue
        seq = int(ids[0])
        seqs.add(seq)
        phase = "decode" if seq == 1 else f"prefill (seq {seq})"
        where = f"io.llm.configs[{n}] ({phase})"
        if model.hidden is not None and ids[2] != model.hidden:
            findings.append(ShapeFinding(
                "hidden_mismatch", rel, f"{where} input_ids", f"[{seq},1,{model.hidden}] "
                f"(llm_config.json hidden_size)", _fmt(ids),
                "the QNN graphs were compiled from a different model; re-run generate_llm_qnn.py "
                "on this export"))
        pos = ins.get("position_ids")
        want_axes = 3 if model.mrope else 1
        if pos != [want_axes, seq]:
            hint = ("llm_config.json says this is an mRoPE model; upstream generate_llm_qnn.py only "
                    "compiles position_ids [3,seq] when the --model path contains 'Qwen' and 'VL' - "
                    "rename the export folder accordingly and re-run it") if model.mrope else (
                    "this model uses 1-D positions; re-run generate_llm_qnn.py from a folder whose "
                    "name does not contain 'VL'/'Qwen3.5'")
            findings.append(ShapeFinding("position_ids_shape", rel, f"{where} position_ids",
                                         f"[{want_axes},{seq}]", _fmt(pos), hint))
        ds = ins.get("deepstack_embeds")
        if model.deepstack:
            want = [DEEPSTACK_LAYERS, seq, model.hidden if model.hidden is not None else "hidden"]
            if ds is None:
                findings.append(ShapeFinding(
                    "deepstack_missing", rel, f"{where} deepstack_embeds", _fmt(want), "absent",
                    "Qwen3-VL feeds deepstack_embeds to the LLM; compile it as an input"))
            elif ds == [3, 1, 1]:
                findings.append(ShapeFinding(
                    "deepstack_placeholder", rel, f"{where} deepstack_embeds", _fmt(want),
                    "[3,1,1] (upstream placeholder)",
                    "upstream makeIOJson compiles deepstack_embeds as [3,1,1]; the runtime sends "
                    f"[3,{seq},hidden] and QNN fails with 'MNN_QNN: Failed to compute shape for "
                    "Plugin Op.' - patch makeIOJson to [3,seq,hidden] and re-run generate_llm_qnn.py"))
            elif model.hidden is not None and ds != want:
                findings.append(ShapeFinding(
                    "deepstack_shape", rel, f"{where} deepstack_embeds", _fmt(want), _fmt(ds),
                    "recompile with deepstack_embeds [3,seq,hidden] for prefill and [3,1,hidden] "
                    "for decode"))
        elif ds is not None:
            findings.append(ShapeFinding(
                "deepstack_unexpected", rel, f"{where} deepstack_embeds", "absent "
                f"(llm_config.json model_type {model.model_type!r} has no deepstack)", _fmt(ds),
                "the runtime will not feed this input ('can't find input'); upstream adds it to "
                "every 'Qwen'+'VL' path - recompile without it", severity=WARNING))
    return findings, seqs


def _check_visual_io(model: _Model, manifest: dict, rel: str,
                     compiled_sizes: list[tuple[int, int]]) -> list[ShapeFinding]:
    findings: list[ShapeFinding] = []
    configs = manifest.get("io", {}).get("visual", {}).get("configs")
    if not isinstance(configs, list) or not configs:
        return [ShapeFinding("io_unknown", rel, "io.visual.configs", "the compiled visual IO",
                             "absent", "write the makeVLIOJson configs into the manifest")]
    for n, cfg in enumerate(configs):
        outs = [str(o) for o in cfg.get("outputs", [])]
        needed = ["image_embeds"] + (["deepstack_feature"] if model.deepstack else [])
        for name in needed:
            if name not in outs:
                findings.append(ShapeFinding(
                    "visual_output_missing", rel, f"io.visual.configs[{n}].outputs",
                    " + ".join(needed), ", ".join(outs) or "none",
                    "upstream makeVLIOJson keeps only image_embeds, so Qwen3-VL loses its deepstack "
                    "features on QNN; add deepstack_feature to the visual outputs and recompile, or "
                    "run the visual model on CPU (config_qnn_cpu_visual.json)"
                    if name == "deepstack_feature" else "the visual graph must output image_embeds"))
    if len(configs) != len(compiled_sizes) and compiled_sizes:
        findings.append(ShapeFinding(
            "image_sizes_io", rel, "io.visual.configs", f"{len(compiled_sizes)} config(s), one per "
            "image size", str(len(configs)), "regenerate the manifest with the visual export"))
    else:
        for n, ((w, h), cfg) in enumerate(zip(compiled_sizes, configs)):
            gh, gw = _qwen3_grid(w, h)
            patches = _inputs(cfg).get("patches")
            if patches and patches[0] != gh * gw:
                findings.append(ShapeFinding(
                    "image_sizes_io", rel, f"io.visual.configs[{n}] patches", f"[{gh * gw},...] for "
                    f"{w}x{h} (WxH)", _fmt(patches),
                    "image_sizes and the compiled visual graphs disagree; regenerate the manifest"))
    return findings


def _check_image_sizes(compiled: list[tuple[int, int]], rel: str,
                       image_sizes: str | Sequence[Any] | None,
                       prompts: Sequence[str]) -> list[ShapeFinding]:
    findings: list[ShapeFinding] = []
    grids = {_qwen3_grid(w, h): (w, h) for w, h in compiled}
    shown = ",".join(f"{w}x{h}" for w, h in compiled) or "none"
    if image_sizes is not None:
        for w, h in parse_image_sizes(image_sizes):
            if _qwen3_grid(w, h) not in grids:
                swapped = _qwen3_grid(h, w) in grids
                findings.append(ShapeFinding(
                    "image_size_mismatch", rel, "image_sizes", f"{w}x{h} (WxH) among compiled sizes",
                    shown, "the export was compiled for the transposed size: --image_sizes is "
                    "WIDTH x HEIGHT" if swapped else
                    f"re-run generate_llm_qnn.py --model_name visual.mnn --image_sizes {w}x{h}"))
    for p_idx, prompt in enumerate(prompts):
        for i_idx, hw in enumerate(parse_hw_tags(prompt)):
            key = f"prompt {p_idx} image {i_idx}"
            if hw is None:
                findings.append(ShapeFinding(
                    "image_size_unforced", rel, key, "<hw>H, W</hw> matching a compiled size",
                    "no <hw> tag", "the image is resized from its own size and the QNN plugin "
                    f"lookup fails unless it lands on a compiled size ({shown}); add "
                    "<hw>HEIGHT, WIDTH</hw>", severity=WARNING))
                continue
            height, width = hw
            try:
                rh, rw = smart_resize(height, width)
            except ValueError as exc:
                findings.append(ShapeFinding("image_size_mismatch", rel, key, "height, width >= 32",
                                             f"<hw>{height}, {width}</hw>", str(exc)))
                continue
            grid = (rh // 16, rw // 16)
            if grid not in grids:
                swapped = (grid[1], grid[0]) in grids
                findings.append(ShapeFinding(
                    "image_size_mismatch", rel, key,
                    f"a compiled size ({shown}, WxH)", f"<hw>{height}, {width}</hw> -> {rw}x{rh} (WxH)",
                    "<hw> is HEIGHT, WIDTH (height first) while --image_sizes is WIDTH x HEIGHT; "
                    f"write <hw>{width}, {height}</hw>" if swapped else
                    "use <hw>H, W</hw> matching a compiled size or recompile with --image_sizes WxH"))
    return findings


def _config_files(root: Path, config_name: str | None) -> list[Path]:
    if config_name is not None:
        return [root / config_name]
    return sorted(root.glob("config*.json"))


def check_export_shapes(
    export_dir: Path,
    config_name: str | None = None,
    *,
    image_sizes: str | Sequence[Any] | None = None,
    prompts: Sequence[str] = (),
    soc_id: int | None = None,
    dsp_arch: str | None = None,
) -> list[ShapeFinding]:
    """Check an export folder against its model type (from llm_config.json) before a run.

    config_name: one runtime config (e.g. "config_qnn.json"); None checks every config*.json.
    image_sizes: the `--image_sizes` the test expects ("WxH,..." or [(w, h)]).
    prompts: prompt lines whose `<hw>H, W</hw>` tags must land on a compiled size.
    soc_id / dsp_arch: the target device; compared with what the QNN binaries were built for.
    Raises ArtifactError only when export_dir is not a folder."""
    root = Path(export_dir)
    if not root.is_dir():
        raise ArtifactError(f"export folder {root} does not exist or is not a directory; "
                            "pass the folder holding llm_config.json and config*.json")
    findings: list[ShapeFinding] = []
    llm_config = _read_json(root / "llm_config.json", findings, root)
    if llm_config is None:
        return findings
    model = _model_from(llm_config)
    if model.hidden is None:
        findings.append(ShapeFinding("bad_llm_config", "llm_config.json", "hidden_size",
                                     "an integer", repr(llm_config.get("hidden_size")),
                                     "re-export: llmexport.py always writes hidden_size"))
    configs = _config_files(root, config_name)
    if not configs:
        findings.append(ShapeFinding("missing_file", "config*.json", "(file)", "a runtime config",
                                     "none", "re-run llmexport.py / generate_llm_qnn.py"))
    manifest: dict | None = None
    manifest_loaded = False
    for cfg_path in configs:
        cfg = _read_json(cfg_path, findings, root)
        if cfg is None:
            continue
        rel = _rel(cfg_path, root)
        base = root / str(cfg.get("base_dir", "")) if cfg.get("base_dir") else root
        npu_dir = base / str(cfg.get("npu_model_dir", "")) if cfg.get("npu_model_dir") else base
        llm_model = str(cfg.get("llm_model", "llm.mnn"))
        visual_model = str(cfg.get("visual_model", "visual.mnn"))
        llm_qnn = llm_model.startswith("qnn/")
        vis_qnn = model.visual and visual_model.startswith("qnn/")
        findings += _check_files(cfg, rel, base, npu_dir, root, model, llm_qnn, vis_qnn)
        if not (llm_qnn or vis_qnn):
            continue
        if not manifest_loaded:
            manifest_loaded = True
            sub: list[ShapeFinding] = []
            manifest = _read_json(root / MANIFEST_PATH, sub, root)
            for f in sub:  # without the sidecar the IO cannot be checked; say so once
                findings.append(ShapeFinding(
                    "io_unknown" if f.kind == "missing_file" else f.kind, f.file, f.key,
                    "the harness QNN export manifest", f.found,
                    "write qnn/export_manifest.json at export time (format in "
                    "virtual_lab/exports.py); generate_llm_qnn.py keeps no record of its IO",
                    severity=WARNING if f.kind == "missing_file" else ERROR))
            if manifest is not None:
                findings += _check_target(manifest, soc_id, dsp_arch)
        if manifest is None:
            continue
        mrel = MANIFEST_PATH
        if llm_qnn:
            io_findings, seqs = _check_llm_io(model, manifest, mrel)
            findings += [f for f in io_findings if f not in findings]
            findings += _check_chunks(cfg, rel, manifest, seqs)
            if cfg.get("backend_type") == "npu":
                findings.append(ShapeFinding(
                    "backend_type", rel, "backend_type", '"cpu" (the QNN plugin runs on the CPU backend)',
                    '"npu"', "npu is online QNN; offline context binaries need backend_type cpu"))
        if vis_qnn:
            compiled = _manifest_sizes(manifest, mrel, findings)
            for f in _check_visual_io(model, manifest, mrel, compiled):
                if f not in findings:
                    findings.append(f)
            for f in _check_image_sizes(compiled, mrel, image_sizes, prompts):
                if f not in findings:
                    findings.append(f)
    return findings


def _manifest_sizes(manifest: dict, rel: str, findings: list[ShapeFinding]) -> list[tuple[int, int]]:
    try:
        return parse_image_sizes(manifest.get("image_sizes", []))
    except ArtifactError as exc:
        f = ShapeFinding("bad_manifest", rel, "image_sizes", "['WxH', ...]",
                         repr(manifest.get("image_sizes")), str(exc))
        if f not in findings:
            findings.append(f)
        return []


def _check_files(cfg: dict, rel: str, base: Path, npu_dir: Path, root: Path, model: _Model,
                 llm_qnn: bool, vis_qnn: bool) -> list[ShapeFinding]:
    need = [("llm_model", str(cfg.get("llm_model", "llm.mnn"))),
            ("llm_weight", str(cfg.get("llm_weight", "llm.mnn.weight"))),
            ("tokenizer_file", str(cfg.get("tokenizer_file", "tokenizer.txt")))]
    if llm_qnn:
        need.append(("embedding_file", str(cfg.get("embedding_file", "embeddings_bf16.bin"))))
    if model.visual:
        vm = str(cfg.get("visual_model", "visual.mnn"))
        need.append(("visual_model", vm))
        if not vis_qnn:
            need.append(("visual_model weight", vm + ".weight"))
    out = []
    for key, name in need:
        if not (base / name).is_file():
            hint = ("Llm::load() checks llm_weight even for QNN: keep llm.mnn.weight (an empty file "
                    "is enough)" if key == "llm_weight" else "push/copy the file or fix the key")
            out.append(ShapeFinding("missing_file", rel, key, _rel(base / name, root), "missing", hint))
    for enabled, prefix in ((llm_qnn, "graphllm"), (vis_qnn, "graphvisual")):
        if enabled and not list((npu_dir / "qnn").glob(f"{prefix}*.bin")):
            out.append(ShapeFinding(
                "missing_file", rel, f"qnn/{prefix}<N>.bin", "the QNN context binaries", "none",
                "the plugin resolves them under npu_model_dir (default: the config's folder)"))
    return out


def _check_chunks(cfg: dict, rel: str, manifest: dict, seqs: set[int]) -> list[ShapeFinding]:
    limits = cfg.get("chunk_limits")
    compiled = manifest.get("chunk_size")
    prefill = max((s for s in seqs if s > 1), default=compiled)
    want = f"[{prefill}, 1]" if prefill else "[chunk_size, 1]"
    if limits is None:
        return [ShapeFinding("chunk_limits", rel, "chunk_limits", want, "absent",
                             "a QNN LLM needs chunk_limits naming its compiled sequence lengths")]
    if not isinstance(limits, list) or len(limits) < 2 or not all(isinstance(x, int) for x in limits):
        return [ShapeFinding("chunk_limits", rel, "chunk_limits", want, json.dumps(limits),
                             "the runtime rejects it: 'size_limit must be array larger than 1, "
                             "eg: [128, 1]'")]
    out = []
    if isinstance(compiled, int) and prefill and compiled != prefill:
        out.append(ShapeFinding("chunk_size", MANIFEST_PATH, "chunk_size", f"{prefill} (compiled "
                                "input_ids seq)", str(compiled), "regenerate the manifest"))
    if prefill and max(limits) != prefill:
        out.append(ShapeFinding(
            "chunk_mismatch", rel, "chunk_limits", want, json.dumps(limits),
            f"the QNN graphs were compiled for chunk {prefill}; set chunk_limits to [{prefill}, 1] "
            "or recompile with --chunk_size " + str(max(limits))))
    elif seqs:
        extra = sorted(set(limits) - seqs)
        if extra:
            out.append(ShapeFinding(
                "chunk_mismatch", rel, "chunk_limits", f"entries among compiled {sorted(seqs)}",
                json.dumps(limits), "a remainder chunk is padded to these sizes; every one needs "
                "a compiled graph ('MNN_QNN: Failed to compute shape for Plugin Op.')"))
    return out


def _check_target(manifest: dict, soc_id: int | None, dsp_arch: str | None) -> list[ShapeFinding]:
    out = []
    built_id, built_arch = manifest.get("soc_id"), str(manifest.get("dsp_arch", ""))
    known = lookup_id(built_id) if isinstance(built_id, int) else None
    if known is not None and normalize_arch(built_arch) != known.htp_arch:
        out.append(ShapeFinding(
            "target_inconsistent", MANIFEST_PATH, "dsp_arch", f"{known.htp_arch} (soc_id {built_id} "
            f"is {known.model})", built_arch or "absent",
            f"the binaries were built for an impossible soc/arch pair; re-run generate_llm_qnn.py "
            f"--soc_id {built_id} --dsp_arch {known.htp_arch}"))
    if soc_id is not None and built_id != soc_id:
        out.append(ShapeFinding("target_mismatch", MANIFEST_PATH, "soc_id", str(soc_id), str(built_id),
                                "the context binaries fail with 'QNN: Failed to validate binary'; "
                                f"re-run generate_llm_qnn.py --soc_id {soc_id}"))
    if dsp_arch is not None:
        want = dsp_arch if dsp_arch.startswith("v") else "v" + dsp_arch
        if built_arch != want:
            out.append(ShapeFinding("target_mismatch", MANIFEST_PATH, "dsp_arch", want, built_arch,
                                    f"re-run generate_llm_qnn.py --dsp_arch {want}"))
    return out


# --------------------------------------------------------------------------------------------
# Runtime log scan
# --------------------------------------------------------------------------------------------

_CODE_HINTS = {
    "1002": "QNN graph finalize failed",
    "1003": "graph IO does not match the compiled graph (tensor count/shape)",
    "6000": "QNN graph execute failed",
    "6004": "graph IO does not match the compiled graph (tensor count/shape)",
}

# (kind, regex, hint); the regexes match the upstream format strings (mnn-llm.md §1/§4).
_LOG_PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (k, re.compile(p), h) for k, p, h in (
        ("broadcast", r"Broad cast error, dim1 = (-?\d+), dim2 = (-?\d+)",
         "a binary op got mismatched rows; for Qwen3-VL with chunking the deepstack tensor keeps "
         "the whole prompt's rows (mnn-llm.md §4(c))"),
        ("compute_shape", r"Compute Shape Error for (\S+)",
         "shape inference failed inside the graph; see the preceding line"),
        ("compute_size_code", r"code=3 in onForward", "COMPUTE_SIZE_ERROR from StaticModule"),
        ("no_outputs", r"\[Error\]: onForward returned no outputs\.?.*",
         "the forward produced nothing; the prompt's result is invalid"),
        ("invalid_output", r"\[Error\]: invalid output tensor from onForward.*",
         "the forward produced an unusable tensor"),
        ("qnn_plugin_shape", r"MNN_QNN: Failed to compute shape for Plugin Op\.",
         "runtime input shapes match no compiled allInputShape: check chunk_limits, "
         "deepstack_embeds [3,1,1], image sizes (check_export_shapes)"),
        ("qnn_raw_shape", r"MNN_QNN: Failed to find raw shape (.*?)\.?$",
         "a tensor's shape is unknown to the plugin; the QNN export does not match the runtime"),
        ("qnn_plugin_attr", r"MNN_QNN: Incorrect Plugin Op, can't find '(\w+)' attr\.",
         "qnn/llm.mnn is not a generate_llm_qnn.py output; regenerate it"),
        ("qnn_execute", r"MNN_QNN: Failed to execute Plugin Op\.", "the QNN graph failed to run"),
        ("qnn_validate_binary", r"QNN: Failed to validate binary: (-?\d+)",
         "context binaries were built for another soc_id/dsp_arch or QNN SDK"),
        ("graph_io_missing", r"can't find (\d+) (input|output): (\S+)",
         "the graph and the runtime disagree on tensor names (e.g. deepstack_embeds)"),
        ("qnn_mask", r"Can't find mask from qnn model", "the QNN graph lacks attention_mask"),
        ("qnn_kv", r"QNN: Error: (KV length -?\d+ larger than max size = -?\d+|Remove -?\d+ larger than current = -?\d+)",
         "the prompt exceeds the KV size compiled with --max_history_token"),
        ("qnn_error_code", r"Error in file (\S+), line (\d+): error code (\d+)", ""),
        ("merged_embeddings", r"\[Error\]: (failed to build merged multimodal embeddings|merged multimodal embeddings are not readable).*",
         "image embeddings and image-pad tokens disagree"),
        ("image_dropped", r"Omni Can't open image",
         "the image was not found (paths are relative to the cwd) and was silently dropped"),
        ("image_too_small", r"Qwen-VL smart resize requires height and width >= factor.*",
         "<hw> or the image is smaller than the resize factor"),
        ("visual_guard", "(" + "|".join(re.escape(g) for g in VISUAL_GUARDS) + r").*",
         "the visual model's outputs do not feed the LLM correctly (e.g. QNN visual without "
         "deepstack_feature); see check_export_shapes"),
    )
)


def scan_log_for_shape_errors(text: str, *, source: str = "log") -> list[ShapeFinding]:
    """Every shape/graph error line in a runtime log (stdout or logcat), in order."""
    findings: list[ShapeFinding] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        for kind, pattern, hint in _LOG_PATTERNS:
            m = pattern.search(line)
            if not m:
                continue
            if kind == "qnn_error_code":
                code = m.group(3)
                hint = (_CODE_HINTS.get(code, "a QNN API call failed") +
                        "; CALL_QNN does not abort, so later output is unreliable")
            findings.append(ShapeFinding(kind, source, m.group(0).strip()[:160], "no such line",
                                         "present", hint, line_no=line_no))
            break
    return findings
