"""Shape guards for MNN/QNN exports: a static check of an export folder before a run and a scan
of the runtime log after it (docs/mnn-export-layout.md, docs/llm-demo-output.md#error-strings,
docs/posdbg.md#image-grid-smart-resize).

Static (`check_export_shapes`): the export is read through `harness.export` (its configs, each
config's backend pair, llm_config.json); the model's needs come from `llm_config.json` keys, never from
the folder name (upstream `generate_llm_qnn.py` keys on the *path string*: a folder without
"Qwen" and "VL" gets `position_ids [1,seq]` and no deepstack input). The compiled QNN IO comes
from the export's own artifacts through `harness.compiled_io` (the NPU stub `qnn/*.mnn`, the
context binaries with `--qnn-sdk`, or the optional sidecar `qnn/export_manifest.json`); every
finding says which `source` it came from (docs/qnn-export-artifacts.md).

- mRoPE models (`is_mrope` / `mrope_axes` / a Qwen-VL model_type) need `position_ids [3,seq]`.
- Deepstack models (`has_deepstack`, Qwen3-VL) need `deepstack_embeds [3,chunk,hidden]` for
  prefill and `[3,1,hidden]` for decode, never upstream's placeholder `[3,1,1]`.
- A QNN visual graph must output both `image_embeds` and `deepstack_feature` (deepstack models).
- `chunk_limits` must be present for a QNN LLM, its largest entry must equal the compiled chunk
  size, and every entry must be a compiled sequence length.
- Every context binary the stub names is in `qnn/`, and no `graph*.bin` is left over.
- soc_id / dsp_arch come from the context binaries (SDK) or the sidecar, else are unknown.
- Image sizes: `--image_sizes` is `WxH` (**width first**); a prompt's `<hw>H, W</hw>` is
  **height first**. Both are compared on the resized patch grid the graph was compiled for.

Runtime (`scan_log_for_shape_errors`): the upstream shape/graph error strings plus the team's
own visual-output guards (`GUARD_*` below; upstream validates nothing,
docs/llm-demo-output.md#error-strings). A patched
runtime prints a guard as one line containing the constant, e.g.
`[Error]: visual output missing deepstack_feature: outputs=1`.

CLI: `python -m harness.checks.shapes EXPORT_DIR [--json] [--config NAME] [--qnn-sdk DIR]
[--image-sizes WxH] [--soc-id N --dsp-arch vNN]` prints the compiled IO and the findings
(exit 0 no error, 1 errors, 2 bad input).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from harness.checks.mrope import smart_resize
from harness.compiled_io import (
    SOURCE_SIDECAR,
    SOURCE_UNKNOWN,
    CompiledIO,
    StubIO,
    binary_files,
    read_compiled_io,
)
from harness.errors import ArtifactError
from harness.export import SIDECAR_PATH, ExportFileError, ExportFolder, FileProblem
from harness.soc import lookup_id, normalize_arch

MANIFEST_PATH = SIDECAR_PATH
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
    source: str = ""  # where the compiled IO came from: stub, qnn-context-binary-utility, sidecar

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def explain(self) -> str:
        if self.line_no is not None:  # a log line: the matched text says it all
            text = f"[{self.severity}] {self.kind}: {self.file} line {self.line_no}: {self.key}"
        else:
            text = (f"[{self.severity}] {self.kind}: {self.file}: {self.key}: "
                    f"expected {self.expected}, found {self.found}")
        if self.source:
            text += f" (from {self.source})"
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


def _file_finding(exc: ExportFileError, root: Path) -> ShapeFinding:
    """An export record the reader (harness.export) could not use, as a finding."""
    rel = _rel(exc.path, root)
    if exc.problem is FileProblem.MISSING:
        return ShapeFinding("missing_file", rel, "(file)", "present", "missing",
                            "re-run the export or copy the file into the folder")
    expected = "a JSON object" if exc.problem is FileProblem.NOT_OBJECT else "valid JSON"
    return ShapeFinding("bad_json", rel, "(file)", expected, exc.detail, "fix or regenerate the file")


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


def _check_llm_io(model: _Model, configs: Sequence[dict], rel: str, source: str
                  ) -> tuple[list[ShapeFinding], set[int]]:
    """Compiled LLM IO vs the model's needs. Returns findings and the compiled seq lengths."""
    findings: list[ShapeFinding] = []
    seqs: set[int] = set()

    def add(kind: str, file: str, key: str, expected: str, found: str, hint: str,
            severity: str = ERROR) -> None:
        findings.append(ShapeFinding(kind, file, key, expected, found, hint, severity, source=source))

    for n, cfg in enumerate(configs):
        ins = _inputs(cfg)
        ids = ins.get("input_ids")
        if not ids or len(ids) != 3:
            add("io_shape", rel, f"shape {n} input_ids", "[seq,1,hidden]", _fmt(ids),
                "regenerate the QNN export with generate_llm_qnn.py (--seperate_embed exports feed "
                "input_ids as embeddings [seq,1,hidden])")
            continue
        seq = int(ids[0])
        seqs.add(seq)
        phase = "decode" if seq == 1 else f"prefill (seq {seq})"
        where = f"shape {n} ({phase})"
        if model.hidden is not None and ids[2] != model.hidden:
            add("hidden_mismatch", rel, f"{where} input_ids", f"[{seq},1,{model.hidden}] "
                f"(llm_config.json hidden_size)", _fmt(ids),
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
            add("position_ids_shape", rel, f"{where} position_ids", f"[{want_axes},{seq}]", _fmt(pos), hint)
        ds = ins.get("deepstack_embeds")
        if model.deepstack:
            want = [DEEPSTACK_LAYERS, seq, model.hidden if model.hidden is not None else "hidden"]
            if ds is None:
                add("deepstack_missing", rel, f"{where} deepstack_embeds", _fmt(want), "absent",
                    "Qwen3-VL feeds deepstack_embeds to the LLM; compile it as an input")
            elif ds == [3, 1, 1]:
                add("deepstack_placeholder", rel, f"{where} deepstack_embeds", _fmt(want),
                    "[3,1,1] (upstream placeholder)",
                    "upstream makeIOJson compiles deepstack_embeds as [3,1,1]; the runtime sends "
                    f"[3,{seq},hidden] and QNN fails with 'MNN_QNN: Failed to compute shape for "
                    "Plugin Op.' - patch makeIOJson to [3,seq,hidden] and re-run generate_llm_qnn.py")
            elif model.hidden is not None and ds != want:
                add("deepstack_shape", rel, f"{where} deepstack_embeds", _fmt(want), _fmt(ds),
                    "recompile with deepstack_embeds [3,seq,hidden] for prefill and [3,1,hidden] "
                    "for decode")
        elif ds is not None:
            add("deepstack_unexpected", rel, f"{where} deepstack_embeds", "absent "
                f"(llm_config.json model_type {model.model_type!r} has no deepstack)", _fmt(ds),
                "the runtime will not feed this input ('can't find input'); upstream adds it to "
                "every 'Qwen'+'VL' path - recompile without it", severity=WARNING)
    if model.mrope and seqs and not any("position_ids" in _inputs(c) for c in configs):
        add("position_ids_shape", rel, "position_ids", "[3,seq] compiled into a graph", "absent",
            "no context binary takes position_ids; re-run generate_llm_qnn.py")
    return findings, seqs


def _check_visual_io(model: _Model, configs: Sequence[dict], rel: str, source: str,
                     compiled_sizes: list[tuple[int, int]] | None) -> list[ShapeFinding]:
    findings: list[ShapeFinding] = []
    for n, cfg in enumerate(configs):
        outs = [str(o) for o in cfg.get("outputs", [])]
        needed = ["image_embeds"] + (["deepstack_feature"] if model.deepstack else [])
        for name in needed:
            if name not in outs:
                findings.append(ShapeFinding(
                    "visual_output_missing", rel, f"shape {n} outputs",
                    " + ".join(needed), ", ".join(outs) or "none",
                    "upstream makeVLIOJson keeps only image_embeds, so Qwen3-VL loses its deepstack "
                    "features on QNN; add deepstack_feature to the visual outputs and recompile, or "
                    "run the visual model on CPU (config_qnn_cpu_visual.json)"
                    if name == "deepstack_feature" else "the visual graph must output image_embeds",
                    source=source))
    if compiled_sizes is None:
        return findings
    if len(configs) != len(compiled_sizes) and compiled_sizes:
        findings.append(ShapeFinding(
            "image_sizes_io", rel, "compiled shapes", f"{len(compiled_sizes)} shape(s), one per "
            f"image size in {MANIFEST_PATH}", str(len(configs)),
            "the sidecar and the compiled visual graphs disagree; regenerate the sidecar", source=source))
    else:
        for n, ((w, h), cfg) in enumerate(zip(compiled_sizes, configs)):
            gh, gw = _qwen3_grid(w, h)
            patches = _inputs(cfg).get("patches")
            if patches and patches[0] != gh * gw:
                findings.append(ShapeFinding(
                    "image_sizes_io", rel, f"shape {n} patches", f"[{gh * gw},...] for "
                    f"{w}x{h} (WxH, {MANIFEST_PATH})", _fmt(patches),
                    "image_sizes and the compiled visual graphs disagree; regenerate the sidecar",
                    source=source))
    return findings


def _check_image_sizes(compiled: list[tuple[int, int]], rel: str,
                       image_sizes: str | Sequence[Any] | None,
                       prompts: Sequence[str], source: str) -> list[ShapeFinding]:
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
                    f"re-run generate_llm_qnn.py --model_name visual.mnn --image_sizes {w}x{h}",
                    source=source))
    for p_idx, prompt in enumerate(prompts):
        for i_idx, hw in enumerate(parse_hw_tags(prompt)):
            key = f"prompt {p_idx} image {i_idx}"
            if hw is None:
                findings.append(ShapeFinding(
                    "image_size_unforced", rel, key, "<hw>H, W</hw> matching a compiled size",
                    "no <hw> tag", "the image is resized from its own size and the QNN plugin "
                    f"lookup fails unless it lands on a compiled size ({shown}); add "
                    "<hw>HEIGHT, WIDTH</hw>", severity=WARNING, source=source))
                continue
            height, width = hw
            try:
                rh, rw = smart_resize(height, width)
            except ValueError as exc:
                findings.append(ShapeFinding("image_size_mismatch", rel, key, "height, width >= 32",
                                             f"<hw>{height}, {width}</hw>", str(exc), source=source))
                continue
            grid = (rh // 16, rw // 16)
            if grid not in grids:
                swapped = (grid[1], grid[0]) in grids
                findings.append(ShapeFinding(
                    "image_size_mismatch", rel, key,
                    f"a compiled size ({shown}, WxH)", f"<hw>{height}, {width}</hw> -> {rw}x{rh} (WxH)",
                    "<hw> is HEIGHT, WIDTH (height first) while --image_sizes is WIDTH x HEIGHT; "
                    f"write <hw>{width}, {height}</hw>" if swapped else
                    "use <hw>H, W</hw> matching a compiled size or recompile with --image_sizes WxH",
                    source=source))
    return findings


def _check_patch_counts(configs: Sequence[dict], rel: str, image_sizes: str | Sequence[Any] | None,
                        prompts: Sequence[str], source: str) -> list[ShapeFinding]:
    """Without the sidecar's image sizes the stub only tells each compiled shape's patch count:
    a requested size must land on one of them (its axis order cannot be told apart)."""
    counts = sorted({p[0] for p in (_inputs(c).get("patches") for c in configs) if p})
    if not counts:
        return []
    wanted: list[tuple[str, int, str]] = []
    if image_sizes is not None:
        for w, h in parse_image_sizes(image_sizes):
            gh, gw = _qwen3_grid(w, h)
            wanted.append(("image_sizes", gh * gw, f"{w}x{h} (WxH)"))
    for p_idx, prompt in enumerate(prompts):
        for i_idx, hw in enumerate(parse_hw_tags(prompt)):
            if hw is None:
                continue
            try:
                rh, rw = smart_resize(*hw)
            except ValueError:
                continue
            wanted.append((f"prompt {p_idx} image {i_idx}", (rh // 16) * (rw // 16), f"<hw>{hw[0]}, {hw[1]}</hw>"))
    return [ShapeFinding("image_size_mismatch", rel, key, f"one of the compiled patch counts {counts}",
                         f"{what} -> {n} patches", "recompile the visual model with --image_sizes for this "
                         "size, or ask for a compiled size", source=source)
            for key, n, what in wanted if n not in counts]


def check_export_shapes(
    export_dir: Path,
    config_name: str | None = None,
    *,
    image_sizes: str | Sequence[Any] | None = None,
    prompts: Sequence[str] = (),
    soc_id: int | None = None,
    dsp_arch: str | None = None,
    qnn_sdk: Path | str | None = None,
    compiled: CompiledIO | None = None,
) -> list[ShapeFinding]:
    """Check an export folder against its model type (from llm_config.json) before a run.

    config_name: one runtime config (e.g. "config_qnn.json"); None checks every config*.json.
    image_sizes: the `--image_sizes` the test expects ("WxH,..." or [(w, h)]).
    prompts: prompt lines whose `<hw>H, W</hw>` tags must land on a compiled size.
    soc_id / dsp_arch: the target device; compared with what the QNN binaries were built for.
    qnn_sdk: a QNN SDK root; its qnn-context-binary-utility then reads the context binaries.
    compiled: the export's compiled IO when the caller already read it (read_compiled_io).
    Raises ArtifactError only when export_dir is not a folder."""
    root = Path(export_dir)
    if not root.is_dir():
        raise ArtifactError(f"export folder {root} does not exist or is not a directory; "
                            "pass the folder holding llm_config.json and config*.json")
    findings: list[ShapeFinding] = []

    def add(new: Iterable[ShapeFinding]) -> None:
        findings.extend(f for f in new if f not in findings)

    export = ExportFolder(root)
    try:
        llm_config = export.llm_config
    except ExportFileError as exc:
        return [_file_finding(exc, root)]
    model = _model_from(llm_config)
    if model.hidden is None:
        findings.append(ShapeFinding("bad_llm_config", "llm_config.json", "hidden_size",
                                     "an integer", repr(llm_config.get("hidden_size")),
                                     "re-export: llmexport.py always writes hidden_size"))
    names = (config_name,) if config_name is not None else export.config_names
    if not names:
        findings.append(ShapeFinding("missing_file", "config*.json", "(file)", "a runtime config",
                                     "none", "re-run llmexport.py / generate_llm_qnn.py"))
    io = compiled
    for name in names:
        try:
            config = export.config(name)
        except ExportFileError as exc:
            add([_file_finding(exc, root)])
            continue
        cfg, rel = config.data, _rel(config.path, root)
        base = root / str(cfg.get("base_dir", "")) if cfg.get("base_dir") else root
        npu_dir = base / str(cfg.get("npu_model_dir", "")) if cfg.get("npu_model_dir") else base
        llm_qnn, vis_qnn = config.pair.uses_qnn_llm, config.pair.uses_qnn_visual
        if not (llm_qnn or vis_qnn):
            add(_check_files(cfg, rel, base, npu_dir, root, model, False, False, None))
            continue
        if io is None:
            io = read_compiled_io(export, qnn_sdk=qnn_sdk)
            add(_reader_findings(io))
            add(_check_target(io, soc_id, dsp_arch))
        add(_check_files(cfg, rel, base, npu_dir, root, model, llm_qnn, vis_qnn, io))
        if llm_qnn:
            if cfg.get("backend_type") == "npu":
                add([ShapeFinding(
                    "backend_type", rel, "backend_type", '"cpu" (the QNN plugin runs on the CPU backend)',
                    '"npu"', "npu is online QNN; offline context binaries need backend_type cpu")])
            stub = io.stubs.get("llm")
            if stub is None:
                add([_io_unknown(io, "llm")])
            else:
                io_findings, seqs = _check_llm_io(model, stub.configs, stub.path, stub.source)
                add(io_findings)
                add(_check_chunks(cfg, rel, stub, io.sidecar, seqs))
                add(_check_binaries(stub, "llm", root, npu_dir))
        if vis_qnn:
            stub = io.stubs.get("visual")
            if stub is None:
                add([_io_unknown(io, "visual")])
                continue
            sizes = _sidecar_sizes(io.sidecar, findings)
            add(_check_visual_io(model, stub.configs, stub.path, stub.source, sizes))
            if sizes:
                add(_check_image_sizes(sizes, stub.path, image_sizes, prompts, MANIFEST_PATH))
            else:
                add(_check_patch_counts(stub.configs, stub.path, image_sizes, prompts, stub.source))
            add(_check_binaries(stub, "visual", root, npu_dir))
    return findings


def _reader_findings(io: CompiledIO) -> list[ShapeFinding]:
    out = [ShapeFinding("io_unreadable", "qnn/", "(compiled IO)", "readable", p,
                        "fix the file named, or give the sidecar / --qnn-sdk", severity=WARNING)
           for p in io.problems]
    for stub in io.stubs.values():
        out += [ShapeFinding("io_unreadable", stub.path, "(compiled IO)", "readable", p,
                             "re-run generate_llm_qnn.py; the stub does not describe its graphs fully",
                             source=stub.source) for p in stub.problems]
    return out


def _io_unknown(io: CompiledIO, kind: str) -> ShapeFinding:
    why = io.unread.get(kind) or f"no qnn/{kind}.mnn stub and no {MANIFEST_PATH}"
    return ShapeFinding(
        "io_unknown", f"qnn/{kind}.mnn", "(compiled IO)", f"the compiled {kind} IO", why,
        "the compiled shapes are read from the NPU stub qnn/*.mnn (needs the `mnn` package: "
        f"pip install 'harness[mnn]'); keep it next to the context binaries, or write {MANIFEST_PATH} "
        "(docs/qnn-export-artifacts.md)", severity=WARNING)


def _sidecar_sizes(sidecar: dict | None, findings: list[ShapeFinding]) -> list[tuple[int, int]] | None:
    if not sidecar or not sidecar.get("image_sizes"):
        return None
    try:
        return parse_image_sizes(sidecar["image_sizes"])
    except ArtifactError as exc:
        f = ShapeFinding("bad_manifest", MANIFEST_PATH, "image_sizes", "['WxH', ...]",
                         repr(sidecar.get("image_sizes")), str(exc), source=SOURCE_SIDECAR)
        if f not in findings:
            findings.append(f)
        return None


def _check_files(cfg: dict, rel: str, base: Path, npu_dir: Path, root: Path, model: _Model,
                 llm_qnn: bool, vis_qnn: bool, io: CompiledIO | None) -> list[ShapeFinding]:
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
    for enabled, kind in ((llm_qnn, "llm"), (vis_qnn, "visual")):
        named = io is not None and kind in io.stubs and io.stubs[kind].binaries
        if enabled and not named and not binary_files(root, npu_dir)[kind]:
            out.append(ShapeFinding(
                "missing_file", rel, f"qnn/graph{kind}<N>.bin", "the QNN context binaries", "none",
                "the plugin resolves them under npu_model_dir (default: the config's folder)"))
    return out


def _check_binaries(stub: StubIO, kind: str, root: Path, npu_dir: Path) -> list[ShapeFinding]:
    """Every context binary the stub names is in qnn/, and no graph<kind>N.bin is left over."""
    named = [b.path for b in stub.binaries]
    if not named:
        return []
    have = binary_files(root, npu_dir)[kind]
    out = []
    missing = [p for p in named if not (npu_dir / p).is_file()]
    if missing:
        out.append(ShapeFinding(
            "missing_binary", stub.path, "context binaries", f"{len(named)} named by {stub.path}",
            f"{len(missing)} missing: " + ", ".join(missing),
            "the QNN plugin fails to load them; copy the whole qnn/ folder from generate_llm_qnn.py's "
            "output (npu_convert.py writes one graph<kind><N>.bin per NPU segment)".replace("<kind>", kind),
            source=stub.source))
    extra = [p for p in have if p not in named]
    if extra:
        out.append(ShapeFinding(
            "leftover_binary", stub.path, "context binaries", f"only the {len(named)} named by {stub.path}",
            f"{len(extra)} more: " + ", ".join(extra),
            "left over from an older compile: delete qnn/ and copy it whole from the latest "
            "generate_llm_qnn.py output", source=stub.source))
    return out


def _check_chunks(cfg: dict, rel: str, stub: StubIO, sidecar: dict | None, seqs: set[int]) -> list[ShapeFinding]:
    limits = cfg.get("chunk_limits")
    recorded = sidecar.get("chunk_size") if sidecar else None
    prefill = max((s for s in seqs if s > 1), default=None)
    want = f"[{prefill}, 1]" if prefill else "[chunk_size, 1]"
    if limits is None:
        return [ShapeFinding("chunk_limits", rel, "chunk_limits", want, "absent",
                             "a QNN LLM needs chunk_limits naming its compiled sequence lengths")]
    if not isinstance(limits, list) or len(limits) < 2 or not all(isinstance(x, int) for x in limits):
        return [ShapeFinding("chunk_limits", rel, "chunk_limits", want, json.dumps(limits),
                             "the runtime rejects it: 'size_limit must be array larger than 1, "
                             "eg: [128, 1]'")]
    out = []
    if isinstance(recorded, int) and prefill and recorded != prefill:
        out.append(ShapeFinding("chunk_size", MANIFEST_PATH, "chunk_size", f"{prefill} (compiled "
                                f"input_ids seq in {stub.path})", str(recorded), "regenerate the sidecar",
                                source=SOURCE_SIDECAR))
    if prefill and max(limits) != prefill:
        out.append(ShapeFinding(
            "chunk_mismatch", rel, "chunk_limits", want, json.dumps(limits),
            f"{stub.path} was compiled for chunk {prefill} but chunk_limits asks for {max(limits)}; "
            f"set chunk_limits to [{prefill}, 1] or recompile with --chunk_size {max(limits)}",
            source=stub.source))
    elif seqs:
        extra = sorted(set(limits) - seqs)
        if extra:
            out.append(ShapeFinding(
                "chunk_mismatch", rel, "chunk_limits", f"entries among compiled {sorted(seqs)}",
                json.dumps(limits), f"{stub.path} has no graph for {extra}: a remainder chunk is padded "
                "to these sizes and every one needs a compiled graph ('MNN_QNN: Failed to compute "
                "shape for Plugin Op.')", source=stub.source))
    return out


def _check_target(io: CompiledIO, soc_id: int | None, dsp_arch: str | None) -> list[ShapeFinding]:
    t = io.target
    where = MANIFEST_PATH if t.source == SOURCE_SIDECAR else "qnn/graph*.bin"
    out = []
    if t.source == SOURCE_UNKNOWN:
        if soc_id is not None or dsp_arch is not None:
            out.append(ShapeFinding(
                "target_unknown", "qnn/graph*.bin", "soc_id/dsp_arch", f"soc_id {soc_id}, {dsp_arch}",
                "unknown", "the export records no target: pass --qnn-sdk (qnn-context-binary-utility "
                f"reads the context binaries) or write soc_id/dsp_arch into {MANIFEST_PATH}",
                severity=WARNING, source=SOURCE_UNKNOWN))
        return out
    known = lookup_id(t.soc_id) if t.soc_id is not None else None
    if known is not None and t.dsp_arch is not None and t.dsp_arch != known.htp_arch:
        out.append(ShapeFinding(
            "target_inconsistent", where, "dsp_arch", f"{known.htp_arch} (soc_id {t.soc_id} "
            f"is {known.model})", t.dsp_arch,
            f"the binaries were built for an impossible soc/arch pair; re-run generate_llm_qnn.py "
            f"--soc_id {t.soc_id} --dsp_arch {known.htp_arch}", source=t.source))
    if soc_id is not None and t.soc_id is not None and t.soc_id != soc_id:
        out.append(ShapeFinding("target_mismatch", where, "soc_id", str(soc_id), str(t.soc_id),
                                "the context binaries fail with 'QNN: Failed to validate binary'; "
                                f"re-run generate_llm_qnn.py --soc_id {soc_id}", source=t.source))
    if dsp_arch is not None and t.dsp_arch is not None:
        want = normalize_arch(dsp_arch) or dsp_arch
        if t.dsp_arch != want:
            out.append(ShapeFinding("target_mismatch", where, "dsp_arch", want, t.dsp_arch,
                                    f"re-run generate_llm_qnn.py --dsp_arch {want}", source=t.source))
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

# (kind, regex, hint); the regexes match the upstream format strings (docs/llm-demo-output.md#error-strings).
_LOG_PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (k, re.compile(p), h) for k, p, h in (
        ("broadcast", r"Broad cast error, dim1 = (-?\d+), dim2 = (-?\d+)",
         "a binary op got mismatched rows; for Qwen3-VL with chunking the deepstack tensor keeps "
         "the whole prompt's rows (docs/posdbg.md#known-failure-shapes)"),
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


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _phase(kind: str, index: int, cfg: dict) -> str:
    if kind != "llm":
        return f"shape {index}"
    ids = _inputs(cfg).get("input_ids")
    if ids:
        return "decode" if ids[0] == 1 else "prefill"
    return f"shape {index}"


def compiled_chunk_size(io: CompiledIO) -> int | None:
    """The prefill chunk the LLM graphs were compiled for (input_ids seq > 1), or None."""
    stub = io.stubs.get("llm")
    seqs = {(_inputs(c).get("input_ids") or [0])[0] for c in stub.configs} if stub else set()
    return max((s for s in seqs if s > 1), default=None)


def describe_io(io: CompiledIO) -> dict[str, Any]:
    """What the CLI prints: source, compiled chunk size and each stub's inputs per shape."""
    inputs: dict[str, Any] = {}
    for kind, stub in io.stubs.items():
        inputs[kind] = {_phase(kind, n, c): {"graph_inputs": _inputs(c), "outputs": list(c.get("outputs", []))}
                        for n, c in enumerate(stub.configs)}
    return {
        "export": str(io.root), "source": io.source, "chunk_size": compiled_chunk_size(io),
        "inputs": inputs,
        "stubs": {k: {"path": s.path, "source": s.source, "declared_inputs": {n: list(d) for n, d in s.declared.items()},
                      "binaries": [b.path for b in s.binaries]} for k, s in io.stubs.items()},
        "target": {"soc_id": io.target.soc_id, "dsp_arch": io.target.dsp_arch, "source": io.target.source},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.checks.shapes",
                                     description="Print an export's compiled QNN IO and the static shape findings.")
    parser.add_argument("export_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--config", default=None, help="the runtime config the run will use (default: every config*.json)")
    parser.add_argument("--qnn-sdk", default=None, help="QNN SDK root: read the context binaries too")
    parser.add_argument("--image-sizes", default=None, help="WxH[,WxH] the run will ask for (width first)")
    parser.add_argument("--soc-id", type=int, default=None)
    parser.add_argument("--dsp-arch", default=None)
    args = parser.parse_args(argv)
    try:
        io = read_compiled_io(args.export_dir, qnn_sdk=args.qnn_sdk)
        findings = check_export_shapes(args.export_dir, args.config, image_sizes=args.image_sizes,
                                       soc_id=args.soc_id, dsp_arch=args.dsp_arch, compiled=io)
    except ArtifactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    errors = [f for f in findings if f.severity == ERROR]
    report = describe_io(io)
    if args.json:
        report["findings"] = [f.to_json() for f in findings]
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['export']}: compiled IO from {report['source']}, chunk size {report['chunk_size']}, "
              f"target soc_id {io.target.soc_id} dsp_arch {io.target.dsp_arch} ({io.target.source})")
        for kind, shapes in report["inputs"].items():
            for phase, entry in shapes.items():
                dims = ", ".join(f"{n} {_fmt(d)}" for n, d in entry["graph_inputs"].items())
                print(f"  {kind} {phase}: {dims or '-'} -> {', '.join(entry['outputs']) or '-'}")
        for f in findings:
            print(f.explain())
        print(f"{len(errors)} error(s), {len(findings) - len(errors)} warning(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
