"""What a validated export is: its files, kind, configs and the target it was compiled for
(read by harness.provision.loaders and .target; the checks in harness.provision.artifacts' docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness import soc
from harness.pairs import BackendPair
from harness.provision.setfiles import ArtifactFile


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
    configs: dict[BackendPair, str] = field(default_factory=dict)  # backend pair -> config (or .pte) name
    target: ExportTarget | None = None
    uses_qnn: bool = False
    is_visual: bool = False
    system_prompt: str = ""  # harness.export.ExportFolder.system_prompt

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


__all__ = ["ExportTarget", "ModelArtifact"]
