"""What QNN's reader said about each context-binary file, remembered per file version, so an
unchanged export's target guard (every `harness push`, every session's provisioning) does not
read its binaries again.

Keyed like the hash cache (harness/provision/hashcache.py): the file's real path, size and
mtime_ns, plus the reader (libQnnSystem.so's path, size and mtime_ns): the same bytes read by
the same library give the same answer. One JSON file in the user's cache folder
(`qnn-reads.json`), written atomically; a missing, corrupt or read-only memo only costs reading
the binaries again. What a .pte's QNN delegates are (their offsets) is part of the file's entry,
so an unchanged program is not parsed again either.

Measured (benchmarks/provision.py, the virtual lab's 29 binaries): an unchanged re-provision
spent about half its 13 ms reading binaries QNN had already judged.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.hostfiles import FileKey, user_cache_dir, write_atomic

MEMO_NAME = "qnn-reads.json"
_VERSION = 1
_MAX_ENTRIES = 4096  # oldest dropped first: a lab host's exports come and go


@dataclass(frozen=True)
class BinaryRead:
    """One context binary's target as QNN read it, or QNN's refusal of it."""

    name: str  # "qnn/graphllm0.bin", "model.pte#forward[0]"
    soc_model: int | None = None
    htp_arch: str | None = None
    qairt_build: str = ""
    refused: str = ""  # QNN's refusal (the file named); empty when read

    def to_json(self) -> list[object]:
        return [self.name, self.soc_model, self.htp_arch, self.qairt_build, self.refused]

    @classmethod
    def from_json(cls, raw: object) -> BinaryRead | None:
        if not (isinstance(raw, list) and len(raw) == 5 and isinstance(raw[0], str)):
            return None
        soc, arch, build, refused = raw[1], raw[2], raw[3], raw[4]
        if not ((soc is None or isinstance(soc, int)) and (arch is None or isinstance(arch, str))
                and isinstance(build, str) and isinstance(refused, str)):
            return None
        return cls(raw[0], soc, arch, build, refused)


def file_key(key: FileKey) -> str:
    """The memo's text of a file version (hostfiles.FileKey: real path, size, mtime_ns)."""
    return f"{key.path}|{key.size}|{key.mtime_ns}"


class ReadMemo:
    """The memo for one reader (a libQnnSystem.so version), loaded from `path`."""

    def __init__(self, reader_key: str, path: Path | None = None) -> None:
        self.reader_key = reader_key
        self.path = path if path is not None else user_cache_dir() / MEMO_NAME
        self._all = self._load(self.path)
        self._new: dict[str, list[BinaryRead]] = {}

    @staticmethod
    def _load(path: Path) -> dict[str, list[object]]:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(raw, dict) or raw.get("version") != _VERSION or not isinstance(raw.get("files"), dict):
            return {}
        return {str(k): v for k, v in raw["files"].items() if isinstance(v, list)}

    def _key(self, fkey: str) -> str:
        return f"{self.reader_key}\n{fkey}"

    def get(self, fkey: str) -> list[BinaryRead] | None:
        """The reads of one file version, or None when not remembered (or unreadable)."""
        raw = self._all.get(self._key(fkey))
        if raw is None:
            return None
        reads = [BinaryRead.from_json(r) for r in raw]
        return None if any(r is None for r in reads) else [r for r in reads if r is not None]

    def put(self, fkey: str, reads: list[BinaryRead]) -> None:
        self._new[self._key(fkey)] = reads

    def save(self) -> None:
        """Merge what was read into the memo file (atomic rename); quiet when it cannot be written."""
        if not self._new:
            return
        merged: dict[str, list[object]] = {**self._load(self.path)}
        for k, reads in self._new.items():
            merged.pop(k, None)  # re-inserted last: the newest entries survive the trim
            merged[k] = [r.to_json() for r in reads]
        # Files that are gone are forgotten (as the hash cache does), so the memo a run loads
        # stays the size of the exports on this host: test sessions leave thousands behind.
        live = {k: v for k, v in merged.items() if os.path.exists(k.split("\n", 1)[-1].rsplit("|", 2)[0])}
        kept = dict(list(live.items())[-_MAX_ENTRIES:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps({"version": _VERSION, "files": kept}))
        except (OSError, HarnessError):
            return  # the next run reads the binaries again, nothing else
        self._all, self._new = kept, {}


def reader_key(system_lib: Path) -> str | None:
    """The reader's identity: libQnnSystem.so's version, as a file (None when absent)."""
    try:
        return file_key(FileKey.of(system_lib))
    except OSError:
        return None


__all__ = ["MEMO_NAME", "BinaryRead", "ReadMemo", "file_key", "reader_key"]
