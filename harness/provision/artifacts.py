"""What an exported model folder is, and whether it is complete and fits a device.

Everything here is checked on the host, before a single byte moves:
- MNN export (`llmexport.py` + `npu/generate_llm_qnn.py`): every `config*.json` is read (through
  harness.export, which also says each config's backend pair from its content) and the files it
  needs resolved (model, weight, tokenizer, embeddings, visual model, and for
  a QNN config its `qnn/graph*.bin` context binaries);
- ExecuTorch export: `.pte` program(s) and a tokenizer;
- the model type comes from `llm_config.json` (or the sidecar manifest), never the folder name;
- the export's target (soc_id / HTP arch) comes from the context binaries themselves: read by
  the host's QAIRT library when found (libQnnSystem.so in-process, harness.compiled_io.qnnlib:
  every qnn/graph*.bin, the QNN delegates of the .pte that will run), else by the QNN SDK's
  `qnn-context-binary-utility` when an SDK is given; then `export_args.json`, the optional
  sidecar `qnn/export_manifest.json` / `export_manifest.json`, or MNN2QNNModel-style file names
  (`visual_qnn_69_v79.mnn`); it is compared with the device's. Without a reader of the binaries
  or a sidecar the target is unknown. The QAIRT build that compiled the binaries is kept too:
  a binary newer than the QNN runtime libraries being pushed is refused (check_qairt).

One rule for what leaves the export, the same for config keys and for listed files: nothing
outside the export folder is pushed. A config key naming a path outside (`../x`, `/abs`) is
refused; a symlink (file or folder) that resolves outside the export is refused too, unless the
caller opts in with `follow_external_links=True` (then its target's content is pushed under the
link's name). Links that stay inside are followed; a folder link back to its own ancestor is
refused (a loop). Every file a config names must be non-empty.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat as stat_mod
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from harness import soc
from harness.errors import ArtifactError
from harness.export import LLM_CONFIG, SIDECAR_NAMES, ExportFolder, read_json_object
from harness.inventory import DeviceSpec
from harness.pairs import CONFIG_NAMES, Backend, BackendPair
from harness.provision.manifest import LOCAL_MANIFEST_NAME

TOKENIZER_NAMES = ("tokenizer.bin", "tokenizer.model", "tokenizer.json", "tokenizer.txt", "tokenizer.mtok")
_BIN_RE = re.compile(r"^graph(llm|visual)(\d+)\.bin$")
_BIN_REF_RE = re.compile(rb"graph(?:llm|visual)\d+\.bin")
_NAME_TARGET_RE = re.compile(r"_(\d+)_v(\d+)\.(?:mnn|bin)$")
_BAD_NAME = re.compile(r"[\x00-\x1f\x7f]")
_SCAN_LIMIT = 64 << 20  # plugin wrappers (qnn/llm.mnn) are small; never scan a weight file


@dataclass(frozen=True)
class ArtifactFile:
    rel: str  # POSIX path relative to the set's root; also its path on the device
    path: Path  # local file
    size: int
    mode: int  # permission bits to give it on the device


@dataclass(frozen=True)
class ExportTarget:
    """The device an export was compiled for (None where the export does not say)."""

    soc_id: int | None = None
    htp_arch: str | None = None  # "v79"
    vtcm_mb: int | None = None
    chunk_size: int | None = None
    source: str = ""  # where it was read, for messages
    qairt_build: str | None = None  # the newest QAIRT that compiled the context binaries (libQnnSystem)

    def describe(self) -> str:
        parts = []
        if self.soc_id is not None:
            info = soc.lookup_id(self.soc_id)
            parts.append(f"soc_id {self.soc_id}" + (f" ({info.model})" if info else ""))
        if self.htp_arch:
            parts.append(f"HTP {self.htp_arch}")
        if self.vtcm_mb is not None:
            parts.append(f"VTCM {self.vtcm_mb} MB")
        return ", ".join(parts) or "no target"


@dataclass(frozen=True)
class ModelArtifact:
    root: Path
    kind: str  # "mnn" | "executorch"
    model_type: str
    files: tuple[ArtifactFile, ...]
    configs: dict[str, str] = field(default_factory=dict)  # backend pair -> config (or .pte) name
    target: ExportTarget | None = None
    uses_qnn: bool = False
    is_visual: bool = False
    system_prompt: str = ""  # harness.export.ExportFolder.system_prompt

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


# ---- small readers --------------------------------------------------------------------------

def _check_link(p: Path, real_root: str, what: str) -> None:
    """Refuse symlink `p` when it resolves outside `real_root` (see the module's rule)."""
    target = os.path.realpath(p)
    if os.path.commonpath([target, real_root]) != real_root:
        raise ArtifactError(
            f"{p}: symlink to {target}, outside the {what} {real_root}; files from outside are not pushed. "
            "Copy the file into the folder, or pass follow_external_links=True to follow such links")


def list_files(root: Path, *, exclude_hidden_harness: bool = True,
               follow_external_links: bool = True) -> list[ArtifactFile]:
    """Every regular file under root (symlinks followed), in a stable order. With
    follow_external_links=False (exports) a link that resolves outside root is refused."""
    out: list[ArtifactFile] = []
    real_root = os.path.realpath(root)
    # Names as strings (os.path), a Path only for each file's `path`: pathlib per name cost
    # half of an unchanged re-provision's ~10 ms (benchmarks/provision.py).
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        real_dir = os.path.realpath(dirpath)
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        for d in dirnames:
            sub = Path(dirpath) / d
            if sub.is_symlink():
                if not follow_external_links:
                    _check_link(sub, real_root, "export")
                target = os.path.realpath(sub)
                if os.path.commonpath([target, real_dir]) == target:
                    raise ArtifactError(f"{sub}: folder symlink to its own ancestor {target} (a loop); remove it")
        for name in sorted(filenames):
            if exclude_hidden_harness and (name.startswith(LOCAL_MANIFEST_NAME) or name.endswith(".pyc")):
                continue
            p = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if _BAD_NAME.search(rel):
                raise ArtifactError(f"{p}: the file name holds a control character (e.g. a newline); rename it")
            try:
                st = os.stat(p)
            except OSError as exc:
                raise ArtifactError(f"{p}: cannot read ({exc}); a dangling symlink? fix or remove it") from None
            if not stat_mod.S_ISREG(st.st_mode):
                continue
            if not follow_external_links and os.path.islink(p):
                _check_link(Path(p), real_root, "export")
            if not os.access(p, os.R_OK):
                raise ArtifactError(f"{p}: not readable; fix its permissions")
            out.append(ArtifactFile(rel, Path(p), st.st_size, stat_mod.S_IMODE(st.st_mode) | 0o644))
    return out


# ---- export target --------------------------------------------------------------------------

def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def _target_from_mapping(data: dict[str, Any], source: str) -> ExportTarget | None:
    """soc_id / dsp_arch (or htp_arch) / vtcm_mb / chunk_size, top level or under qnn/npu."""
    for scope in (data, data.get("qnn"), data.get("npu")):
        if not isinstance(scope, dict):
            continue
        raw_arch = next((scope[k] for k in ("dsp_arch", "htp_arch", "arch") if scope.get(k) not in (None, "")), None)
        raw_soc = scope.get("soc_id")
        soc_model = scope.get("soc_model") or scope.get("soc")
        if raw_arch is None and raw_soc is None and not soc_model:
            continue
        arch = soc.normalize_arch(raw_arch) if raw_arch is not None else None
        if raw_arch is not None and arch is None:
            raise ArtifactError(f"{source}: dsp_arch {raw_arch!r} is not an HTP arch "
                                f"(known: {', '.join(soc.HTP_ARCHES)}); fix the export's record")
        soc_id = _int_or_none(raw_soc)
        if raw_soc is not None and soc_id is None:
            raise ArtifactError(f"{source}: soc_id {raw_soc!r} is not a number; fix the export's record")
        if isinstance(soc_model, str) and soc_model:
            info = soc.lookup(soc_model)
            if info is None:
                raise ArtifactError(f"{source}: soc_model {soc_model!r} is not in the SoC table; "
                                    "give soc_id and dsp_arch instead")
            soc_id = soc_id if soc_id is not None else info.soc_id
            arch = arch or info.htp_arch
        if soc_id is not None:
            info = soc.lookup_id(soc_id)
            if info is not None and arch is not None and info.htp_arch != arch:
                raise ArtifactError(f"{source}: soc_id {soc_id} is {info.model} (HTP {info.htp_arch}) but dsp_arch "
                                    f"says {arch}; the export record contradicts itself, re-export")
            if info is not None and arch is None:
                arch = info.htp_arch
        return ExportTarget(soc_id=soc_id, htp_arch=arch, vtcm_mb=_int_or_none(scope.get("vtcm_mb")),
                            chunk_size=_int_or_none(scope.get("chunk_size")), source=source)
    return None


def _merge_targets(found: list[ExportTarget]) -> ExportTarget | None:
    if not found:
        return None
    merged = found[0]
    for t in found[1:]:
        for attr in ("soc_id", "htp_arch", "vtcm_mb", "chunk_size"):
            a, b = getattr(merged, attr), getattr(t, attr)
            if a is not None and b is not None and a != b:
                raise ArtifactError(f"the export's target disagrees with itself: {merged.source} says {attr} {a}, "
                                    f"{t.source} says {b}; re-export or fix the stale record")
        merged = ExportTarget(
            soc_id=merged.soc_id if merged.soc_id is not None else t.soc_id,
            htp_arch=merged.htp_arch or t.htp_arch,
            vtcm_mb=merged.vtcm_mb if merged.vtcm_mb is not None else t.vtcm_mb,
            chunk_size=merged.chunk_size if merged.chunk_size is not None else t.chunk_size,
            source=f"{merged.source} + {t.source}",
            qairt_build=merged.qairt_build or t.qairt_build,
        )
    return merged


def _binaries_target(root: Path, qnn_sdk: Path | str | None, programs: tuple[str, ...]) -> ExportTarget | None:
    """The target the context binaries state: through the host's libQnnSystem.so when found, else
    the SDK tool (qnn_sdk). One binary QNN refuses while it reads the others is a damaged copy,
    refused here; when it reads none (a format these libraries do not know), other records decide."""
    # compiled_io (MNN graph reading, ctypes, subprocess) is imported only when needed.
    from harness.compiled_io import SOURCE_QNNLIB, read_binaries_target, read_binary_target

    bt = read_binaries_target(root, qnn_sdk, programs=programs)
    if bt is not None and bt.read:
        if bt.refused:
            raise ArtifactError(f"{root}: QNN's reader accepts {len(bt.read)} of the export's context binaries but "
                                f"refuses {len(bt.refused)}: {bt.refused[0]}")
        if len(bt.soc_ids) > 1 or len(bt.htp_archs) > 1:
            raise ArtifactError(f"{root}: the context binaries disagree on their target (soc_id {list(bt.soc_ids)}, "
                                f"HTP {list(bt.htp_archs)}); recompile them together")
        shown = ", ".join(bt.read[:2]) + (f", ... {len(bt.read)} binaries" if len(bt.read) > 2 else "")
        return ExportTarget(soc_id=bt.soc_ids[0] if bt.soc_ids else None,
                            htp_arch=bt.htp_archs[0] if bt.htp_archs else None,
                            source=f"{SOURCE_QNNLIB} ({shown})", qairt_build=bt.newest_build)
    if not qnn_sdk:
        return None
    from_bins = read_binary_target(root, qnn_sdk)
    if from_bins is None:
        return None
    bins, rels = from_bins
    return ExportTarget(soc_id=bins.soc_id, htp_arch=bins.dsp_arch, source=f"{bins.source} ({rels})")


def read_target(root: Path, files: list[ArtifactFile], qnn_sdk: Path | str | None = None,
                export: ExportFolder | None = None, *, binaries: bool = True,
                programs: tuple[str, ...] = ()) -> ExportTarget | None:
    """Every record of the export's target that exists, checked to agree with each other.
    `binaries`: read the context binaries (the one record a real export always has; a QNN
    export): qnn/graph*.bin, and the QNN delegates of `programs` (the .pte that will run)."""
    found: list[ExportTarget] = []
    from_bins = _binaries_target(root, qnn_sdk, programs) if binaries else None
    if from_bins is not None:
        found.append(from_bins)
    args = root / "export_args.json"
    if args.is_file():
        t = _target_from_mapping(read_json_object(args, "export_args.json"), str(args))
        if t:
            found.append(t)
    for sidecar in (export or ExportFolder(root)).sidecars:
        t = _target_from_mapping(sidecar.data, str(sidecar.path))
        if t:
            found.append(t)
    for f in files:
        m = _NAME_TARGET_RE.search(f.rel)
        if m:
            arch = soc.normalize_arch(m.group(2))
            if arch:
                found.append(ExportTarget(soc_id=int(m.group(1)), htp_arch=arch, source=str(f.path)))
    return _merge_targets(found)


def check_target(artifact: ModelArtifact, device: DeviceSpec, *, allow_unknown_target: bool = False) -> None:
    """Refuse an export compiled for another SoC/arch than the device's (before any push)."""
    if not artifact.uses_qnn:
        return
    t = artifact.target
    if t is None or (t.htp_arch is None and t.soc_id is None):
        if allow_unknown_target:
            return
        raise ArtifactError(
            f"{artifact.root}: QNN export without a recorded target (no soc_id/dsp_arch in export_args.json, "
            f"{' or '.join(SIDECAR_NAMES)}, and no reader of the context binaries here); cannot tell "
            f"whether it fits {device.name} ({device.soc_model}, HTP {device.htp_arch}). Install the host's "
            f"QAIRT libraries (pip install 'harness[qnn]') or pass the QNN SDK (--qnn-sdk) so the context "
            f"binaries are read, add {SIDECAR_NAMES[0]} with soc_id and dsp_arch, or pass allow_unknown_target")
    here = f"{device.name} ({device.soc_model}, soc_id {device.soc_id}, HTP {device.htp_arch})"
    if t.htp_arch is not None and t.htp_arch != device.htp_arch:
        raise ArtifactError(f"{artifact.root}: compiled for {t.describe()} ({t.source}) but {here} needs "
                            f"HTP {device.htp_arch} context binaries; re-export with --soc_id {device.soc_id} "
                            f"--dsp_arch {device.htp_arch} or pick a {t.htp_arch} device")
    if t.soc_id is not None and t.soc_id != device.soc_id:
        raise ArtifactError(f"{artifact.root}: compiled for {t.describe()} ({t.source}) but the device is {here}; "
                            f"QNN refuses context binaries for another SoC: re-export with --soc_id {device.soc_id}")
    if t.vtcm_mb is not None and t.vtcm_mb > device.vtcm_mb:
        raise ArtifactError(f"{artifact.root}: compiled for {t.vtcm_mb} MB VTCM ({t.source}) but {here} has "
                            f"{device.vtcm_mb} MB; re-export with --vtcm_mb {device.vtcm_mb}")


def check_qairt(artifact: ModelArtifact, runtime_build: str | None, runtime_where: str = "the runtime") -> None:
    """Refuse context binaries compiled by a newer QAIRT than the QNN runtime libraries being
    pushed (QNN cannot load a binary from a newer release). Unknown on either side: no verdict."""
    from harness.qnn.host import qairt_tuple, qairt_version_of

    t = artifact.target
    if not artifact.uses_qnn or t is None or not t.qairt_build or not runtime_build:
        return
    made, runs = qairt_tuple(t.qairt_build), qairt_tuple(runtime_build)
    if made is None or runs is None or made <= runs:
        return
    raise ArtifactError(
        f"{artifact.root}: its context binaries were compiled by QAIRT {qairt_version_of(t.qairt_build)} "
        f"({t.qairt_build}, {t.source}) but the QNN libraries being pushed are QAIRT "
        f"{qairt_version_of(runtime_build)} ({runtime_build}, {runtime_where}); QNN does not load a context binary "
        f"from a newer QAIRT: push QAIRT {qairt_version_of(t.qairt_build)} or newer libraries (--qnn-sdk) or "
        f"re-export with QAIRT {qairt_version_of(runtime_build)}")


# ---- MNN ------------------------------------------------------------------------------------

def _resolve(root: Path, base: PurePosixPath, name: Any, config: Path, key: str) -> str:
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


def _load_mnn(export: ExportFolder, files: list[ArtifactFile], qnn_sdk: Path | str | None = None) -> ModelArtifact:
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


def _load_executorch(export: ExportFolder, files: list[ArtifactFile]) -> ModelArtifact:
    root = export.root
    ptes = [f for f in files if f.rel.endswith(".pte") and "/" not in f.rel]
    toks = [f for f in files if f.rel in TOKENIZER_NAMES]
    if not toks:
        raise ArtifactError(f"{root}: ExecuTorch export without a tokenizer (one of {', '.join(TOKENIZER_NAMES)}); "
                            "copy the runtime tokenizer next to the .pte")
    found = export.sidecar
    sidecar: dict[str, Any] = found.data if found is not None else {}
    model_type = export.program_model_type
    pte = str(sidecar.get("model_path") or ptes[0].rel)
    if pte not in {f.rel for f in ptes}:
        raise ArtifactError(f"{root / SIDECAR_NAMES[1]}: model_path {pte!r} is not a .pte in {root}; fix it")
    by_rel = {f.rel: f for f in files}
    _refuse_empty(root, [(pte, by_rel[pte])] + [(t.rel, t) for t in toks])
    uses_qnn = any(_pte_uses_qnn(f.path) for f in ptes) or any(k in sidecar for k in ("soc_id", "dsp_arch", "htp_arch"))
    return ModelArtifact(root=root, kind="executorch", model_type=str(model_type), files=tuple(files),
                         configs={BackendPair(Backend.QNN if uses_qnn else Backend.CPU).name: pte},
                         target=read_target(root, files, export=export, binaries=uses_qnn, programs=(pte,)),
                         uses_qnn=uses_qnn)


def load_export(model_dir: Path | str, *, qnn_sdk: Path | str | None = None,
                follow_external_links: bool = False) -> ModelArtifact:
    """Read and validate an export folder (MNN or ExecuTorch). Raises ArtifactError.
    qnn_sdk: a QNN SDK root; the MNN export's context binaries then tell its soc_id/dsp_arch.
    Symlinks leaving the folder are refused unless follow_external_links (module docstring)."""
    root = Path(model_dir).expanduser()
    if not root.is_dir():
        raise ArtifactError(f"{root}: not a folder; pass the export's output folder (the one with config.json "
                            "or the .pte)")
    root = root.resolve()
    files = list_files(root, follow_external_links=follow_external_links)
    if not files:
        raise ArtifactError(f"{root}: the folder is empty; pass the export's output folder")
    names = {f.rel for f in files}
    export = ExportFolder(root)
    if LLM_CONFIG in names or any(n in names for n in export.config_names):
        return _load_mnn(export, files, qnn_sdk)
    if any(n.endswith(".pte") for n in names):
        return _load_executorch(export, files)
    raise ArtifactError(f"{root}: neither an MNN export (llm_config.json, config.json, llm.mnn...) nor an "
                        "ExecuTorch export (*.pte); pass the export's output folder")


__all__ = [
    "ArtifactFile", "ExportTarget", "ModelArtifact", "check_qairt", "check_target", "list_files", "load_export",
    "read_target",
]
