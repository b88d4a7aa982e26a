"""Provisioning: validated exports and QNN runtimes pushed once, incrementally and atomically.

Front doors (CLI `harness push/status`, the pytest plugin) call these plain functions. Names
load on first use (PEP 562), so `harness push` does not import the runtime resolver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "artifact_types": ("ExportTarget", "ModelArtifact"),
    "artifacts": ("load_export",),
    "elf": ("abi_of", "device_abis", "is_elf", "read_elf", "read_machine"),
    "emulator": ("provision_emulator_runtime",),
    "hashcache": ("HashCache", "default_cache", "default_cache_path", "sha256_file"),
    "manifest": ("LOCAL_MANIFEST_NAME", "DeviceStamp", "FileEntry", "Manifest", "read_local_manifest"),
    "model": ("provision_model",),
    "preflight": ("LoadAxis", "PreflightError", "RuntimeQairt", "check_qairt", "device_qairt", "emulator_qairt",
                  "pushed_runtime", "runner_qairt", "smoke_load"),
    "progress": ("LogProgress", "NullProgress", "Progress", "TerminalProgress", "make_progress"),
    "runtime": ("RUNNERS", "RuntimeBundle", "provision_runtime", "resolve_runtime", "default_runtime_name"),
    "scripts": ("parse_stat_lines", "split_sections"),
    "setfiles": ("ArtifactFile", "list_files"),
    "status": ("SetStatus", "StatusReport", "device_status", "remove_set"),
    "sync": ("SyncResult", "sync_set"),
    "target": ("check_target", "preflight_program"),
    "types": ("ProvisionedModel", "ProvisionedRuntime"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.provision.artifact_types import ExportTarget as ExportTarget
    from harness.provision.artifact_types import ModelArtifact as ModelArtifact
    from harness.provision.artifacts import load_export as load_export
    from harness.provision.elf import abi_of as abi_of
    from harness.provision.elf import device_abis as device_abis
    from harness.provision.elf import is_elf as is_elf
    from harness.provision.elf import read_elf as read_elf
    from harness.provision.elf import read_machine as read_machine
    from harness.provision.emulator import provision_emulator_runtime as provision_emulator_runtime
    from harness.provision.hashcache import HashCache as HashCache
    from harness.provision.hashcache import default_cache as default_cache
    from harness.provision.hashcache import default_cache_path as default_cache_path
    from harness.provision.hashcache import sha256_file as sha256_file
    from harness.provision.manifest import LOCAL_MANIFEST_NAME as LOCAL_MANIFEST_NAME
    from harness.provision.manifest import DeviceStamp as DeviceStamp
    from harness.provision.manifest import FileEntry as FileEntry
    from harness.provision.manifest import Manifest as Manifest
    from harness.provision.manifest import read_local_manifest as read_local_manifest
    from harness.provision.model import provision_model as provision_model
    from harness.provision.preflight import LoadAxis as LoadAxis
    from harness.provision.preflight import PreflightError as PreflightError
    from harness.provision.preflight import RuntimeQairt as RuntimeQairt
    from harness.provision.preflight import check_qairt as check_qairt
    from harness.provision.preflight import device_qairt as device_qairt
    from harness.provision.preflight import emulator_qairt as emulator_qairt
    from harness.provision.preflight import pushed_runtime as pushed_runtime
    from harness.provision.preflight import runner_qairt as runner_qairt
    from harness.provision.preflight import smoke_load as smoke_load
    from harness.provision.progress import LogProgress as LogProgress
    from harness.provision.progress import NullProgress as NullProgress
    from harness.provision.progress import Progress as Progress
    from harness.provision.progress import TerminalProgress as TerminalProgress
    from harness.provision.progress import make_progress as make_progress
    from harness.provision.runtime import RUNNERS as RUNNERS
    from harness.provision.runtime import RuntimeBundle as RuntimeBundle
    from harness.provision.runtime import default_runtime_name as default_runtime_name
    from harness.provision.runtime import provision_runtime as provision_runtime
    from harness.provision.runtime import resolve_runtime as resolve_runtime
    from harness.provision.scripts import parse_stat_lines as parse_stat_lines
    from harness.provision.scripts import split_sections as split_sections
    from harness.provision.setfiles import ArtifactFile as ArtifactFile
    from harness.provision.setfiles import list_files as list_files
    from harness.provision.status import SetStatus as SetStatus
    from harness.provision.status import StatusReport as StatusReport
    from harness.provision.status import device_status as device_status
    from harness.provision.status import remove_set as remove_set
    from harness.provision.sync import SyncResult as SyncResult
    from harness.provision.sync import sync_set as sync_set
    from harness.provision.target import check_target as check_target
    from harness.provision.target import preflight_program as preflight_program
    from harness.provision.types import ProvisionedModel as ProvisionedModel
    from harness.provision.types import ProvisionedRuntime as ProvisionedRuntime
