"""Provisioning: validated exports and QNN runtimes pushed once, incrementally and atomically.

Front doors (CLI `harness push/status`, the pytest plugin) call these plain functions. Names
load on first use (PEP 562), so `harness push` does not import the runtime resolver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {
    "artifacts": ("ArtifactFile", "ExportTarget", "ModelArtifact", "check_target", "load_export"),
    "hashcache": ("HashCache", "default_cache", "default_cache_path"),
    "manifest": ("FileEntry", "Manifest"),
    "progress": ("LogProgress", "NullProgress", "Progress", "TerminalProgress", "make_progress"),
    "runtime": ("RUNNERS", "RuntimeBundle", "provision_runtime", "resolve_runtime"),
    "model": ("provision_model",),
    "status": ("SetStatus", "StatusReport", "device_status", "remove_set"),
    "sync": ("SyncResult", "sync_set"),
    "types": ("TEXT_CONFIGS", "VL_CONFIGS", "ProvisionedModel", "ProvisionedRuntime"),
})

if TYPE_CHECKING:
    from harness.provision.artifacts import ArtifactFile, ExportTarget, ModelArtifact, check_target, load_export
    from harness.provision.hashcache import HashCache, default_cache, default_cache_path
    from harness.provision.manifest import FileEntry, Manifest
    from harness.provision.model import provision_model
    from harness.provision.progress import LogProgress, NullProgress, Progress, TerminalProgress, make_progress
    from harness.provision.runtime import RUNNERS, RuntimeBundle, provision_runtime, resolve_runtime
    from harness.provision.status import SetStatus, StatusReport, device_status, remove_set
    from harness.provision.sync import SyncResult, sync_set
    from harness.provision.types import TEXT_CONFIGS, VL_CONFIGS, ProvisionedModel, ProvisionedRuntime
