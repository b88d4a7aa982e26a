"""Content manifests: sha256, size and mode per file of a pushed set.

The same format lives in two places: in the user's cache folder (what was last provisioned
from a local folder, keyed by that folder's resolved path: `local_manifest_path`; never
beside the artifacts, since export and runtime folders are read, never written: they are
often shared, versioned or read-only) and on the device (`<work_dir>/manifests/...`,
written last and atomically, so it only ever describes files that are fully in place).
The device copy also records each file's device stamp (inode, mtime as the device reports
them): comparing stamps is how a re-provision verifies the device without re-reading bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HostWriteError, ProvisionError
from harness.hostfiles import user_cache_dir, write_atomic

# The name older harness versions wrote beside an export; such a leftover is never pushed.
LOCAL_MANIFEST_NAME = ".harness-manifest.json"
FORMAT = "harness-manifest/1"


@dataclass(frozen=True)
class FileEntry:
    rel: str  # POSIX path relative to the set's root
    sha256: str
    size: int
    mode: int  # permission bits, e.g. 0o755


@dataclass(frozen=True)
class DeviceStamp:
    """What `stat` on the device said about a file right after it was put in place."""

    inode: int
    mtime: int


@dataclass
class Manifest:
    kind: str  # "model" | "runtime"
    name: str
    files: dict[str, FileEntry] = field(default_factory=dict)
    remote_dir: str = ""
    meta: dict[str, object] = field(default_factory=dict)
    device: dict[str, DeviceStamp] = field(default_factory=dict)  # empty in local manifests

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files.values())

    def content_digest(self) -> str:
        """sha256 over (path, sha256, size, mode) of every file: equal digests = equal sets."""
        h = hashlib.sha256()
        for rel in sorted(self.files):
            f = self.files[rel]
            h.update(f"{rel}\0{f.sha256}\0{f.size}\0{f.mode:o}\n".encode())
        return h.hexdigest()

    def to_json(self) -> str:
        # One line: the device probe prints it between marker lines.
        data = {
            "format": FORMAT,
            "kind": self.kind,
            "name": self.name,
            "remote_dir": self.remote_dir,
            "meta": self.meta,
            "files": {
                rel: {"sha256": f.sha256, "size": f.size, "mode": f"{f.mode:o}",
                      **({"inode": self.device[rel].inode, "mtime": self.device[rel].mtime}
                         if rel in self.device else {})}
                for rel, f in sorted(self.files.items())
            },
        }
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, where: str) -> Manifest:
        """Parse a manifest; `where` names its location in the error message."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} document")
            files: dict[str, FileEntry] = {}
            device: dict[str, DeviceStamp] = {}
            for rel, v in data["files"].items():
                files[rel] = FileEntry(rel, str(v["sha256"]), int(v["size"]), int(str(v["mode"]), 8))
                if "inode" in v and "mtime" in v:
                    device[rel] = DeviceStamp(int(v["inode"]), int(v["mtime"]))
            return cls(kind=str(data["kind"]), name=str(data["name"]), files=files,
                       remote_dir=str(data.get("remote_dir", "")), meta=dict(data.get("meta") or {}),
                       device=device)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProvisionError(f"{where}: unreadable provisioning manifest ({exc}); "
                                 "delete it and provision again") from None


def local_manifest_path(root: Path) -> Path:
    """Where the manifest of what was last provisioned from the local folder `root` is kept:
    `<user cache>/manifests/<sha256 of its resolved path>.json`."""
    key = hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:24]
    return user_cache_dir() / "manifests" / f"{key}.json"


def read_local_manifest(root: Path) -> Manifest | None:
    """The manifest of the last provisioning from `root`, if any and readable."""
    path = local_manifest_path(root)
    try:
        return Manifest.from_json(path.read_text(encoding="utf-8"), str(path))
    except (OSError, ProvisionError):
        return None


def write_local_manifest(root: Path, manifest: Manifest) -> Path | None:
    """Record what was provisioned from `root` in the user's cache folder; None when that
    cannot be written (the manifest is a convenience, not a requirement)."""
    path = local_manifest_path(root)
    local = Manifest(kind=manifest.kind, name=manifest.name, files=dict(manifest.files),
                     remote_dir=manifest.remote_dir, meta={**manifest.meta, "source": os.path.realpath(root)})
    text = local.to_json()
    try:
        if path.exists() and path.read_text(encoding="utf-8") == text:
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    except (OSError, HostWriteError):
        return None
    _forget_gone_sources(path.parent)
    return path


def _forget_gone_sources(folder: Path) -> None:
    """Drop manifests of folders that no longer exist, so the cache does not grow forever
    (only when a manifest was written: an unchanged re-provision reads one file)."""
    for entry in folder.glob("*.json"):
        try:
            source = json.loads(entry.read_text(encoding="utf-8")).get("meta", {}).get("source")
            if isinstance(source, str) and source and not os.path.exists(source):
                entry.unlink()
        except (OSError, ValueError, AttributeError):
            continue  # another process's file mid-write, or not ours: leave it


__all__ = [
    "DeviceStamp", "FileEntry", "LOCAL_MANIFEST_NAME", "Manifest", "local_manifest_path", "read_local_manifest",
    "write_local_manifest",
]
