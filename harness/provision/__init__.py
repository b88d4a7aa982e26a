"""Provisioning: validated exports and QNN runtimes pushed once, incrementally and atomically.

Front doors (CLI `harness push/status`, the pytest plugin) call these plain functions.
"""

from harness.provision.artifacts import ArtifactFile, ExportTarget, ModelArtifact, check_target, load_export
from harness.provision.hashcache import HashCache, default_cache, default_cache_path
from harness.provision.manifest import FileEntry, Manifest
from harness.provision.progress import LogProgress, NullProgress, Progress, TerminalProgress, make_progress
from harness.provision.runtime import RUNNERS, RuntimeBundle, provision_runtime, resolve_runtime
from harness.provision.sync import (
    SetStatus, StatusReport, SyncResult, device_status, provision_model, remove_set, sync_set,
)
from harness.provision.types import TEXT_CONFIGS, VL_CONFIGS, ProvisionedModel, ProvisionedRuntime

__all__ = [
    "ArtifactFile", "ExportTarget", "FileEntry", "HashCache", "LogProgress", "Manifest", "ModelArtifact",
    "NullProgress", "Progress", "ProvisionedModel", "ProvisionedRuntime", "RUNNERS", "RuntimeBundle", "SetStatus",
    "StatusReport", "SyncResult", "TEXT_CONFIGS", "TerminalProgress", "VL_CONFIGS", "check_target",
    "default_cache", "default_cache_path", "device_status", "load_export", "make_progress", "provision_model",
    "provision_runtime", "remove_set", "resolve_runtime", "sync_set",
]
