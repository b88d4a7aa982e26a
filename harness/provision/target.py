"""The export's target (soc_id / HTP arch / VTCM, the QAIRT build of its context binaries): read
from every record that exists (the context binaries through the host's QAIRT library or the QNN
SDK's tool, `export_args.json`, the sidecar, MNN2QNNModel-style file names), checked to agree,
then compared with the device's and with the QNN runtime being pushed (before any push)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from harness import soc
from harness.errors import ArtifactError
from harness.export import SIDECAR_NAMES, ExportFolder, read_json_object
from harness.inventory import DeviceSpec
from harness.provision.artifact_types import ExportTarget, ModelArtifact
from harness.provision.preflight import LoadAxis, PreflightError, RuntimeQairt, check_qairt, retarget_fix
from harness.provision.setfiles import ArtifactFile

_NAME_TARGET_RE = re.compile(r"_(\d+)_v(\d+)\.(?:mnn|bin)$")


def _int_or_none(v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def _target_from_mapping(data: Mapping[str, object], source: str) -> ExportTarget | None:
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
    # Only the binaries' reader: the stub reader, the SDK tool's runner and ctypes load when needed.
    from harness.qnn.compiled_io import SOURCE_QNNLIB, read_binaries_target

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
    from harness.qnn.compiled_io import read_binary_target

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
    fix = retarget_fix(artifact, device)
    if t.htp_arch is not None and t.htp_arch != device.htp_arch:
        raise PreflightError(f"{artifact.root}: wrong SoC/arch: compiled for {t.describe()} ({t.source}) but {here} "
                             f"needs HTP {device.htp_arch} context binaries; {fix}, or pick a {t.htp_arch} device",
                             LoadAxis.TARGET)
    if t.soc_id is not None and t.soc_id != device.soc_id:
        raise PreflightError(f"{artifact.root}: wrong SoC: compiled for {t.describe()} ({t.source}) but the device is "
                             f"{here}; QNN refuses context binaries for another SoC: {fix}", LoadAxis.TARGET)
    if t.vtcm_mb is not None and t.vtcm_mb > device.vtcm_mb:
        raise PreflightError(f"{artifact.root}: compiled for {t.vtcm_mb} MB VTCM ({t.source}) but {here} has "
                             f"{device.vtcm_mb} MB; re-export with --vtcm_mb {device.vtcm_mb}", LoadAxis.TARGET)


def preflight_program(pte: Path, device: DeviceSpec, runtime: RuntimeQairt | None) -> None:
    """The load preflight of one program run where it lies (host QNN material on the emulator, never
    provisioned): its delegates' SoC against the device's, their QAIRT against the runtime's."""
    from harness.qnn import PteError

    try:
        target = read_target(pte.parent, [], programs=(pte.name,))
    except PteError:  # a damaged program: its run names QNN's own failure (runners/qnn_log.py)
        return
    art = ModelArtifact(root=pte, kind="executorch", model_type="", files=(), target=target, uses_qnn=True)
    check_target(art, device, allow_unknown_target=True)
    check_qairt(art, runtime)


__all__ = ["check_target", "preflight_program", "read_target"]
