"""The load preflight of one model provision (preflight.py's rules), with its device read folded
into the sync's first round trip: an unchanged re-provision asks the device once. Where the
device's QAIRT comes from the runtime manifests, their paths as last listed from this host are
read together with the set's manifest (sync.py `preflight_reads`; a runtime this host pushes is
added). The device is listed (one shell command, which refreshes the paths) the first time from
this host, and again only when the binaries would be refused: a runtime pushed since from
another host may be the newer one. A device without a runtime manifest that records a QAIRT
gives no verdict, as before: the load on the device decides."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.errors import ProvisionError
from harness.provision.artifact_types import ModelArtifact
from harness.provision.manifest import Manifest
from harness.provision.preflight import (
    PreflightError,
    RuntimeQairt,
    check_qairt,
    emulator_qairt,
    manifest_qairt,
    newest_qairt,
    remembered_runtime_manifests,
    runner_qairt,
    smoke_load,
)
from harness.transport import Transport


class LoadCheck:
    """`reads`: the device files to read in the sync's first round trip; `run(blobs)` before a
    byte moves."""

    def __init__(self, artifact: ModelArtifact, transport: Transport, runtime_build: str | None,
                 qnn_sdk: Path | str | None) -> None:
        self.artifact, self.transport = artifact, transport
        device = transport.device
        self.runtime: RuntimeQairt | None = None
        self.from_device = False
        if artifact.uses_qnn:
            self.runtime = runner_qairt(device, runtime_build)
            if self.runtime is None and device.emulated:
                self.runtime = emulator_qairt(str(qnn_sdk) if qnn_sdk else None)
            self.from_device = self.runtime is None and not device.emulated
        remembered = remembered_runtime_manifests(device) if self.from_device else []
        self.listed = remembered is not None  # else the device is listed once, and remembered
        self.reads = remembered or []

    def run(self, blobs: Mapping[str, bytes | None]) -> None:
        if not self.artifact.uses_qnn:
            return
        runtime = self.runtime
        if self.from_device:
            runtime = self._remembered(blobs) if self.listed else manifest_qairt(self.transport)
            try:
                check_qairt(self.artifact, runtime)
            except PreflightError:
                if not self.listed:
                    raise  # listed just now: the verdict stands
                runtime = manifest_qairt(self.transport)  # maybe a runtime pushed since from another host
        check_qairt(self.artifact, runtime)  # needs the binaries' build string
        smoke_load(self.artifact, runtime)  # does not: a build string that cannot be read is a binary to try

    def _remembered(self, blobs: Mapping[str, bytes | None]) -> RuntimeQairt | None:
        found: list[tuple[str, Manifest | ProvisionError]] = []
        for path in self.reads:
            raw = blobs.get(path)
            if raw is None:
                continue  # removed since: the others (or a new listing) decide
            try:
                found.append((path, Manifest.from_json(raw.decode("utf-8", errors="replace"), path)))
            except (ProvisionError, ValueError) as exc:
                found.append((path, ProvisionError(str(exc))))
        return newest_qairt(found, self.transport.device)


__all__ = ["LoadCheck"]
