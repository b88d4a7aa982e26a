"""The static check of an export folder before a run (docs/mnn-export-layout.md,
docs/qnn-export-artifacts.md). The export is read through `harness.export` (its configs, each
config's backend pair, llm_config.json); the compiled QNN IO through `harness.qnn.compiled_io` (the
NPU stub `qnn/*.mnn`, the context binaries through the host's libQnnSystem.so or `--qnn-sdk`, or
the optional sidecar `qnn/export_manifest.json`); every finding says which `source` it came from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.checks.shapes.compiled import (
    ModelNeeds,
    check_binaries,
    check_chunks,
    check_llm_io,
    check_target,
    model_needs,
)
from harness.checks.shapes.cpu_graphs import check_cpu_graph_io
from harness.checks.shapes.findings import WARNING, ShapeKind, shape_finding
from harness.checks.shapes.visual import check_image_sizes, check_patch_counts, check_visual_io, parse_image_sizes
from harness.errors import ArtifactError
from harness.export import SIDECAR_PATH, ExportFileError, ExportFolder, FileProblem
from harness.findings import Finding
from harness.qnn.compiled_io import SOURCE_SIDECAR, CompiledIO, binary_files, read_compiled_io


def check_export_shapes(
    export_dir: Path,
    config_name: str | None = None,
    *,
    image_sizes: str | Sequence[object] | None = None,
    prompts: Sequence[str] = (),
    soc_id: int | None = None,
    dsp_arch: str | None = None,
    qnn_sdk: Path | str | None = None,
    compiled: CompiledIO | None = None,
) -> list[Finding]:
    """Check an export folder against its model type (from llm_config.json) before a run.

    config_name: one runtime config (e.g. "config_qnn.json"); None checks every config*.json.
    image_sizes: the `--image_sizes` the test expects ("WxH,..." or [(w, h)]).
    prompts: prompt lines whose `<hw>H, W</hw>` tags must land on a compiled size.
    soc_id / dsp_arch: the target device; compared with what the QNN binaries were built for.
    qnn_sdk: a QNN SDK root; its x86 libraries (else the host's, harness.qnn) or its
    qnn-context-binary-utility then read the context binaries.
    compiled: the export's compiled IO when the caller already read it (read_compiled_io).
    Raises ArtifactError only when export_dir is not a folder."""
    root = Path(export_dir)
    if not root.is_dir():
        raise ArtifactError(f"export folder {root} does not exist or is not a directory; "
                            "pass the folder holding llm_config.json and config*.json")
    findings: list[Finding] = []

    def add(new: Iterable[Finding]) -> None:
        findings.extend(f for f in new if f not in findings)

    export = ExportFolder(root)
    try:
        llm_config = export.llm_config
    except ExportFileError as exc:
        return [_file_finding(exc, root)]
    model = model_needs(llm_config)
    if model.hidden is None:
        findings.append(shape_finding(ShapeKind.BAD_LLM_CONFIG, "llm_config.json", "hidden_size",
                                     "an integer", repr(llm_config.get("hidden_size")),
                                     "re-export: llmexport.py always writes hidden_size"))
    names = (config_name,) if config_name is not None else export.config_names
    if not names:
        findings.append(shape_finding(ShapeKind.MISSING_FILE, "config*.json", "(file)", "a runtime config",
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
        if model.visual and not (llm_qnn or vis_qnn):  # both CPU graphs: visual outputs vs LLM inputs
            add(check_cpu_graph_io(model, base, rel, str(cfg.get("visual_model", "visual.mnn")),
                                   str(cfg.get("llm_model", "llm.mnn"))))
        if not (llm_qnn or vis_qnn):
            add(_check_files(cfg, rel, base, npu_dir, root, model, False, False, None))
            continue
        if io is None:
            io = read_compiled_io(export, qnn_sdk=qnn_sdk)
            add(_reader_findings(io))
            add(check_target(io, soc_id, dsp_arch))
        add(_check_files(cfg, rel, base, npu_dir, root, model, llm_qnn, vis_qnn, io))
        if llm_qnn:
            add(_llm_stub_findings(cfg, rel, root, npu_dir, model, io))
        if vis_qnn:
            add(_visual_stub_findings(root, npu_dir, model, io, image_sizes, prompts, findings))
    return findings


def _llm_stub_findings(cfg: Mapping[str, object], rel: str, root: Path, npu_dir: Path, model: ModelNeeds,
                       io: CompiledIO) -> list[Finding]:
    """A config running the LLM on QNN: its backend type, the compiled LLM IO against the
    model, its chunk limits and the context binaries its stub names."""
    out: list[Finding] = []
    if cfg.get("backend_type") == "npu":
        out.append(shape_finding(
            ShapeKind.BACKEND_TYPE, rel, "backend_type", '"cpu" (the QNN plugin runs on the CPU backend)',
            '"npu"', "npu is online QNN; offline context binaries need backend_type cpu"))
    stub = io.stubs.get("llm")
    if stub is None:
        return out + [_io_unknown(io, "llm")]
    io_findings, seqs = check_llm_io(model, stub.configs, stub.path, stub.source)
    return out + io_findings + check_chunks(cfg, rel, stub, io.sidecar, seqs) + check_binaries(stub, "llm", root, npu_dir)


def _visual_stub_findings(root: Path, npu_dir: Path, model: ModelNeeds, io: CompiledIO,
                          image_sizes: str | Sequence[object] | None, prompts: Sequence[str],
                          findings: list[Finding]) -> list[Finding]:
    """A config running the visual encoder on QNN: the compiled visual IO, the image sizes
    (the sidecar's, else the stub's patch counts) and its context binaries. A sidecar whose
    image sizes cannot be read adds its finding to `findings`."""
    stub = io.stubs.get("visual")
    if stub is None:
        return [_io_unknown(io, "visual")]
    sizes = _sidecar_sizes(io.sidecar, findings)
    out = check_visual_io(model, stub.configs, stub.path, stub.source, sizes)
    if sizes:
        out += check_image_sizes(sizes, stub.path, image_sizes, prompts, SIDECAR_PATH)
    else:
        out += check_patch_counts(stub.configs, stub.path, image_sizes, prompts, stub.source)
    return out + check_binaries(stub, "visual", root, npu_dir)


def _file_finding(exc: ExportFileError, root: Path) -> Finding:
    """An export record the reader (harness.export) could not use, as a finding."""
    rel = _rel(exc.path, root)
    if exc.problem is FileProblem.MISSING:
        return shape_finding(ShapeKind.MISSING_FILE, rel, "(file)", "present", "missing",
                            "re-run the export or copy the file into the folder")
    expected = "a JSON object" if exc.problem is FileProblem.NOT_OBJECT else "valid JSON"
    return shape_finding(ShapeKind.BAD_JSON, rel, "(file)", expected, exc.detail, "fix or regenerate the file")


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _reader_findings(io: CompiledIO) -> list[Finding]:
    out = [shape_finding(ShapeKind.IO_UNREADABLE, "qnn/", "(compiled IO)", "readable", p,
                        "fix the file named, or give the sidecar / --qnn-sdk", severity=WARNING)
           for p in io.problems]
    for stub in io.stubs.values():
        out += [shape_finding(ShapeKind.IO_UNREADABLE, stub.path, "(compiled IO)", "readable", p,
                             "re-run generate_llm_qnn.py; the stub does not describe its graphs fully",
                             source=stub.source) for p in stub.problems]
    return out


def _io_unknown(io: CompiledIO, kind: str) -> Finding:
    why = io.unread.get(kind) or f"no qnn/{kind}.mnn stub and no {SIDECAR_PATH}"
    return shape_finding(
        ShapeKind.IO_UNKNOWN, f"qnn/{kind}.mnn", "(compiled IO)", f"the compiled {kind} IO", why,
        "the compiled shapes are read from the NPU stub qnn/*.mnn (needs the `mnn` package: "
        f"pip install 'harness[mnn]'); keep it next to the context binaries, or write {SIDECAR_PATH} "
        "(docs/qnn-export-artifacts.md)", severity=WARNING)


def _sidecar_sizes(sidecar: dict[str, Any] | None, findings: list[Finding]) -> list[tuple[int, int]] | None:
    if not sidecar or not sidecar.get("image_sizes"):
        return None
    try:
        return parse_image_sizes(sidecar["image_sizes"])
    except ArtifactError as exc:
        f = shape_finding(ShapeKind.BAD_MANIFEST, SIDECAR_PATH, "image_sizes", "['WxH', ...]",
                         repr(sidecar.get("image_sizes")), str(exc), source=SOURCE_SIDECAR)
        if f not in findings:
            findings.append(f)
        return None


def _check_files(cfg: Mapping[str, object], rel: str, base: Path, npu_dir: Path, root: Path, model: ModelNeeds,
                 llm_qnn: bool, vis_qnn: bool, io: CompiledIO | None) -> list[Finding]:
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
            out.append(shape_finding(ShapeKind.MISSING_FILE, rel, key, _rel(base / name, root), "missing", hint))
    for enabled, kind in ((llm_qnn, "llm"), (vis_qnn, "visual")):
        named = io is not None and kind in io.stubs and io.stubs[kind].binaries
        if enabled and not named and not binary_files(root, npu_dir)[kind]:
            out.append(shape_finding(
                ShapeKind.MISSING_FILE, rel, f"qnn/graph{kind}<N>.bin", "the QNN context binaries", "none",
                "the plugin resolves them under npu_model_dir (default: the config's folder)"))
    return out


__all__ = ["check_export_shapes"]
