"""The two export loaders: an MNN export (every config's files resolved, present, non-empty, inside
the folder; a QNN config's context binaries complete) and an ExecuTorch export (.pte program(s)
and a tokenizer). Each hands back a ModelArtifact with the target harness.provision.target reads."""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path, PurePosixPath

from harness.errors import ArtifactError
from harness.export import SIDECAR_NAMES, ExportFolder
from harness.pairs import CONFIG_NAMES, Backend, BackendPair
from harness.provision.artifact_types import ModelArtifact
from harness.provision.setfiles import ArtifactFile
from harness.provision.target import read_target
from harness.qnn import check_program

TOKENIZER_NAMES = ("tokenizer.bin", "tokenizer.model", "tokenizer.json", "tokenizer.txt", "tokenizer.mtok")
_BIN_RE = re.compile(r"^graph(llm|visual)(\d+)\.bin$")
_BIN_REF_RE = re.compile(rb"graph(?:llm|visual)\d+\.bin")
_SCAN_LIMIT = 64 << 20  # plugin wrappers (qnn/llm.mnn) are small; never scan a weight file


# ---- MNN ------------------------------------------------------------------------------------

def _resolve(root: Path, base: PurePosixPath, name: object, config: Path, key: str) -> str:
    if not isinstance(name, str) or not name:
        raise ArtifactError(f"{config}: key {key!r} must be a file name, got {name!r}; fix the config")
    rel = PurePosixPath(os.path.normpath((base / name).as_posix()))
    if rel.is_absolute() or rel.parts[:1] == ("..",):
        raise ArtifactError(f"{config}: key {key!r} = {name!r} points outside the export folder {root}; "
                            "the export must be self-contained (use a path relative to the config)")
    return rel.as_posix()


def _check_qnn_bins(root: Path, qnn_model: str, kind: str, config: Path, have: dict[str, ArtifactFile]) -> None:
    """The QNN context binaries a plugin model needs: present, non-empty, no gaps, and every
    `graph*.bin` the wrapper names (its plugin `path` attributes) exists."""
    qdir = posixpath.dirname(qnn_model)  # "" at the top (names as strings: see list_files)
    bins = {}
    for rel, f in have.items():
        parent, name = posixpath.split(rel)
        m = _BIN_RE.match(name)
        if parent == qdir and m and m.group(1) == kind:
            bins[int(m.group(2))] = f
    where = f"{root / qdir}" if qdir else f"{root}"
    if not bins:
        raise ArtifactError(f"{config}: uses {qnn_model} but {where} holds no graph{kind}<N>.bin context "
                            f"binaries; copy the whole qnn/ folder from generate_llm_qnn.py's output")
    nums = sorted(bins)
    gaps = [n for n in range(nums[0], nums[-1] + 1) if n not in bins]
    if gaps:
        missing = ", ".join(f"graph{kind}{n}.bin" for n in gaps)
        raise ArtifactError(f"{config}: {where} is missing {missing} (have {len(nums)} of "
                            f"graph{kind}{nums[0]}..{nums[-1]}); copy the complete qnn/ folder")
    empty = [f.rel for f in bins.values() if f.size == 0]
    if empty:
        raise ArtifactError(f"{config}: {', '.join(empty)} is empty (a truncated copy?); copy it again")
    wrapper = have[qnn_model]
    if wrapper.size <= _SCAN_LIMIT:
        names = {m.decode() for m in _BIN_REF_RE.findall(wrapper.path.read_bytes())}
        missing_refs = sorted(n for n in names if posixpath.join(qdir, n) not in have and n.startswith(f"graph{kind}"))
        if missing_refs:
            raise ArtifactError(f"{config}: {wrapper.path} refers to {', '.join(missing_refs)} which {where} lacks; "
                                "copy the complete qnn/ folder")


def _refuse_empty(source: Path, named: list[tuple[str, ArtifactFile]]) -> None:
    """Every file a config (or the export's record) names must hold data: a 0-byte weight or
    tokenizer is a truncated copy, refused like an empty qnn/graph*.bin."""
    empty = [label for label, f in named if f.size == 0]
    if empty:
        raise ArtifactError(f"{source}: names empty file(s) {'; '.join(empty)} (0 bytes: a truncated copy?); "
                            "copy them again from the export output or re-export")


def load_mnn(export: ExportFolder, files: list[ArtifactFile], qnn_sdk: Path | str | None = None) -> ModelArtifact:
    root = export.root
    have = {f.rel: f for f in files}
    llm_config = export.llm_config
    model_type = export.model_type
    is_visual = export.is_visual
    present = [name for name in export.config_names if name in have]
    if not present:
        raise ArtifactError(f"{root}: no runtime config ({', '.join(CONFIG_NAMES)}); "
                            "this does not look like a complete MNN export")
    uses_qnn = False
    for name in present:
        config = export.config(name)
        cfg_path, cfg = config.path, config.data
        base = PurePosixPath(".")
        if "base_dir" in cfg:
            base = PurePosixPath(_resolve(root, base, cfg["base_dir"], cfg_path, "base_dir"))
        need: dict[str, str] = {}

        # Called only within this iteration, so the loop's current names are the ones meant.
        def want(key: str, default: str | None) -> str | None:
            value = cfg.get(key, llm_config.get(key, default))  # noqa: B023
            if value is None:
                return None
            need[key] = _resolve(root, base, value, cfg_path, key)  # noqa: B023
            return need[key]  # noqa: B023

        llm_model = want("llm_model", "llm.mnn")
        want("llm_weight", "llm.mnn.weight")  # Llm::load checks it even for qnn/llm.mnn
        want("tokenizer_file", "tokenizer.txt")
        qnn_llm = llm_model is not None and config.pair.uses_qnn_llm
        # NPU exports need --seperate_embed, so embeddings are a file of their own there.
        if "embedding_file" in cfg or "embedding_file" in llm_config or qnn_llm:
            want("embedding_file", "embeddings_bf16.bin")
        visual = want("visual_model", "visual.mnn") if is_visual or "visual_model" in cfg else None
        missing = [f"{k} -> {v}" for k, v in need.items() if v not in have]
        if missing:
            raise ArtifactError(f"{cfg_path}: needs files the export lacks: {'; '.join(missing)}; "
                                "copy them from the export output or re-export")
        _refuse_empty(cfg_path, [(f"{k} -> {v}", have[v]) for k, v in need.items()])
        if qnn_llm and llm_model is not None:
            uses_qnn = True
            _check_qnn_bins(root, llm_model, "llm", cfg_path, have)
        if visual is not None and config.pair.uses_qnn_visual:
            uses_qnn = True
            _check_qnn_bins(root, visual, "visual", cfg_path, have)
    configs = {pair: cfg for pair, cfg in export.pairs.items() if cfg in have}
    if any(_BIN_RE.match(PurePosixPath(f.rel).name) for f in files):
        uses_qnn = True
    return ModelArtifact(root=root, kind="mnn", model_type=model_type, files=tuple(files),
                         configs=configs, target=read_target(root, files, qnn_sdk, export, binaries=uses_qnn),
                         uses_qnn=uses_qnn, is_visual=is_visual, system_prompt=export.system_prompt)


# ---- ExecuTorch -----------------------------------------------------------------------------

def _pte_uses_qnn(path: Path) -> bool:
    # The delegate id sits in the program flatbuffer at the file's start; the blobs follow.
    with open(path, "rb") as f:
        return b"QnnBackend" in f.read(4 << 20)


def load_executorch(export: ExportFolder, files: list[ArtifactFile]) -> ModelArtifact:
    root = export.root
    ptes = [f for f in files if f.rel.endswith(".pte") and "/" not in f.rel]
    if not ptes:
        nested = sorted(f.rel for f in files if f.rel.endswith(".pte"))
        raise ArtifactError(f"{root}: no .pte at the top of the folder, only in a subfolder ({nested[0]}); pass "
                            f"the folder that holds the .pte ({root / posixpath.dirname(nested[0])})")
    toks = [f for f in files if f.rel in TOKENIZER_NAMES]
    if not toks:
        raise ArtifactError(f"{root}: ExecuTorch export without a tokenizer (one of {', '.join(TOKENIZER_NAMES)}); "
                            "copy the runtime tokenizer next to the .pte")
    found = export.sidecar
    sidecar: dict[str, object] = found.data if found is not None else {}
    model_type = export.program_model_type
    pte = str(sidecar.get("model_path") or ptes[0].rel)
    if pte not in {f.rel for f in ptes}:
        raise ArtifactError(f"{root / SIDECAR_NAMES[1]}: model_path {pte!r} is not a .pte in {root}; fix it")
    by_rel = {f.rel: f for f in files}
    _refuse_empty(root, [(pte, by_rel[pte])] + [(t.rel, t) for t in toks])
    for f in ptes:  # a truncated, random or corrupt program is refused here, never sent or run
        check_program(f.path)
    uses_qnn = any(_pte_uses_qnn(f.path) for f in ptes) or any(k in sidecar for k in ("soc_id", "dsp_arch", "htp_arch"))
    return ModelArtifact(root=root, kind="executorch", model_type=str(model_type), files=tuple(files),
                         configs={BackendPair(Backend.QNN if uses_qnn else Backend.CPU): pte},
                         target=read_target(root, files, export=export, binaries=uses_qnn, programs=(pte,)),
                         uses_qnn=uses_qnn)


__all__ = ["TOKENIZER_NAMES", "load_executorch", "load_mnn"]
