"""Provisioning an exported model: validated against the device, then synced as one set."""

from __future__ import annotations

from pathlib import Path

from harness.provision.artifact_types import ModelArtifact
from harness.provision.artifacts import load_export
from harness.provision.hashcache import HashCache, default_cache
from harness.provision.loadcheck import LoadCheck
from harness.provision.manifest import Manifest, read_local_manifest, write_local_manifest
from harness.provision.progress import Progress, make_progress
from harness.provision.sync import sync_set
from harness.provision.target import check_target
from harness.provision.types import ProvisionedModel
from harness.transport import Transport


def provision_model(
    transport: Transport,
    model_dir: Path | str,
    *,
    artifact: ModelArtifact | None = None,
    name: str | None = None,
    cache: HashCache | None = None,
    progress: Progress | None = None,
    verify: str = "size",
    allow_unknown_target: bool = False,
    follow_external_links: bool = False,
    qnn_sdk: Path | str | None = None,
    runtime_qairt_build: str | None = None,
) -> ProvisionedModel:
    """Validate an export against the device, then push it incrementally to
    `<work_dir>/models/<name>` (default name: the folder's name). Nothing moves when the
    export is incomplete or compiled for another SoC/arch. Symlinks leaving the export are
    refused unless `follow_external_links` (artifacts.py states the rule). `artifact`: the export
    when the caller already read it (load_export), so it is not read twice. `qnn_sdk`: a QNN SDK
    root; the context binaries then tell the soc_id/HTP arch the export was compiled for
    (docs/qnn-export-artifacts.md), where no sidecar records it. `runtime_qairt_build`: the QAIRT
    build of the QNN libraries pushed with the runtime (ProvisionedRuntime.qairt_build); without it,
    the QAIRT the device's runtime manifests record, or on an emulated HTP the host's
    (provision/preflight.py). Context binaries from a newer QAIRT are refused before a byte moves
    (provision/loadcheck.py)."""
    if artifact is None:
        artifact = load_export(model_dir, qnn_sdk=qnn_sdk, follow_external_links=follow_external_links)
    check_target(artifact, transport.device, allow_unknown_target=allow_unknown_target)
    # The load preflight (loadcheck.py): its device read joins the sync's first round trip,
    # and it decides before a byte moves.
    load = LoadCheck(artifact, transport, runtime_qairt_build, qnn_sdk)
    target = artifact.target
    meta: dict[str, object] = {"kind": artifact.kind, "model_type": artifact.model_type,
                            "configs": {p.name: c for p, c in artifact.configs.items()}, "source": str(artifact.root)}
    if target is not None:
        meta.update({k: v for k, v in (("soc_id", target.soc_id), ("htp_arch", target.htp_arch)) if v is not None})
    # Without a record of this folder's files having been provisioned (from this host's cache
    # folder), the device is not asked whether it holds them unchanged: a first push.
    root = artifact.root
    known = read_local_manifest(root)
    maybe_unchanged = known is not None and {r: (f.size, f.mode) for r, f in known.files.items()} == {
        f.rel: (f.size, f.mode) for f in artifact.files}

    def record(manifest: Manifest) -> None:
        write_local_manifest(root, manifest)  # while the device commits

    result = sync_set(transport, artifact.files, kind="model", name=name or artifact.root.name, meta=meta,
                      cache=cache if cache is not None else default_cache(), progress=progress or make_progress(),
                      verify=verify, maybe_unchanged=maybe_unchanged, on_manifest=record,
                      preflight_reads=load.reads, preflight=load.run)
    return ProvisionedModel(device=transport.device.name, remote_dir=result.remote_dir, kind=artifact.kind,
                            model_type=artifact.model_type, configs=dict(artifact.configs),
                            bytes_sent=result.bytes_sent, files_sent=result.files_sent,
                            visual=artifact.is_visual, system_prompt=artifact.system_prompt)


__all__ = ["provision_model"]
