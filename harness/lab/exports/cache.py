"""The export cache: one folder per export, content-addressed, beside the harness's hash cache.

The key (`export_key`) is the sha256 of what decides an export's bytes: the command template, the
target, the format, the sha256 of the declared inputs, the env, and the tool versions the stage
can read (QAIRT, ExecuTorch, MNN). QNN's builds are deterministic (two builds of one model give
the identical context binary), so an unchanged key never needs building twice; a deterministic
failure (QNN refusing an op) is kept too, a host-dependent one (timeout, OOM, missing tool) is not.

Layout under `<user cache>/exports/`: `entries/<key>/` holds `out/` (the export), `export.log`,
`entry.json` (written last: the files with their sizes and sha256, the outcome) and `used` (its
mtime is the last use, for LRU eviction); `tmp/` holds builds in progress. A build is made in
`tmp/` and renamed to `entries/<key>` when whole. An entry whose entry.json is missing, unreadable
or disagrees with its files (their bytes read again, not the stat-keyed hash cache) is partial or
corrupt: it is removed and rebuilt, never used. `leases/` holds what live runs still need.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.export import CACHED_ENTRY_FILE, CACHED_LOG_FILE, CACHED_OUT_DIR
from harness.hostfiles import write_atomic
from harness.lab.exports.leases import Leases
from harness.lab.exports.tools import tools_for
from harness.lab.plan import REFERENCE_MODULE, ExportJob
from harness.provision import HashCache, default_cache_path, sha256_file

ENTRY_VERSION = 1
ENTRY_FILE, LOG_FILE, OUT_DIR, USED_FILE = CACHED_ENTRY_FILE, CACHED_LOG_FILE, CACHED_OUT_DIR, "used"


def default_cache_root() -> Path:
    """Beside the hash cache (`hashes.json`): the user's cache folder's `exports/`."""
    return default_cache_path().parent / "exports"


def _walk(path: Path) -> Iterable[tuple[str, Path]]:
    """Every file under `path`, symlinked subfolders followed (a declared input's files are what
    it really holds); a folder met twice (a link cycle, two links to one folder) is walked once."""
    if path.is_file():
        yield path.name, path
        return
    seen: set[tuple[int, int]] = set()
    for folder, dirs, files in os.walk(path, followlinks=True):
        try:
            st = os.stat(folder)
        except OSError:
            dirs.clear()
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirs.clear()
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        for name in sorted(files):
            full = Path(folder) / name
            if full.is_file():
                yield str(full.relative_to(path)), full


def inputs_digest(paths: Iterable[Path], hashes: HashCache) -> str:
    """sha256 over every declared input's files (relative name and content sha256, in order)."""
    h = hashlib.sha256()
    for root in sorted(paths, key=str):  # by name, not by where the plan's folder happens to be
        h.update(f"input {root.name}\n".encode())
        for rel, full in _walk(root):
            # fsencode: a name that is not UTF-8 is hashed by its bytes, as the file system holds it.
            h.update(os.fsencode(rel) + f"\0{hashes.digest(full)}\n".encode())
    return h.hexdigest()


def key_material(job: ExportJob, inputs_sha: str, tools: Mapping[str, str | None]) -> dict[str, Any]:
    """What decides the export's bytes. A debug build adds its `debug_args` (its own key); a plain
    build's material never names them, so declaring them rebuilds nothing already cached."""
    b = job.build
    if job.reference:  # the same for every target and format: the files it reads, the builder, the tools
        new_tokens = b.reference.new_tokens if b.reference is not None else None
        return {"version": ENTRY_VERSION, "reference": REFERENCE_MODULE, "new_tokens": new_tokens,
                "inputs": inputs_sha, "tools": tools_for(b.kind, tools, reference=True)}
    material = {"version": ENTRY_VERSION, "command": b.key_command(), "shell": b.shell, "kind": b.kind,
                "env": dict(sorted(b.env.items())), "qnn_host": b.qnn_host, "target": job.target.soc,
                "soc_id": job.target.soc_id, "dsp_arch": job.target.dsp_arch, "format": job.format,
                "inputs": inputs_sha, "tools": tools_for(b.kind, tools)}
    return {**material, "debug_args": list(b.debug_args)} if job.debug else material


def export_key(material: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


@dataclass
class CacheEntry:
    key: str
    folder: Path
    data: dict[str, Any]

    @property
    def out(self) -> Path:
        return self.folder / OUT_DIR

    @property
    def log(self) -> Path:
        return self.folder / LOG_FILE

    @property
    def passed(self) -> bool:
        return self.data.get("status") == "passed"

    @property
    def size(self) -> int:
        return int(self.data.get("bytes") or 0)


def _files_of(out: Path, digest: Callable[[Path], str]) -> dict[str, list[Any]]:
    return {rel: [full.stat().st_size, digest(full)] for rel, full in _walk(out)} if out.is_dir() else {}


def _failure_problem(failure: object) -> str:
    if not isinstance(failure, dict):
        return "corrupt (no outcome in entry.json)"
    missing = [k for k in ("failure_class", "message") if not isinstance(failure.get(k), str)]
    return f"corrupt (its failure has no {' or '.join(missing)})" if missing else ""


class ExportCache:
    """Entries by key; `hashes` (the harness's hash cache) makes re-checking an entry cheap."""

    def __init__(self, root: Path, hashes: HashCache):
        self.root, self.hashes = root, hashes
        self.entries, self.tmp = root / "entries", root / "tmp"
        self.leases = Leases(root / "leases")

    def new_build_dir(self, key: str) -> Path:
        """A fresh folder under tmp/ for one build (pid in the name: a dead run's are swept)."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        folder = self.tmp / f"{key}.{os.getpid()}.{secrets.token_hex(3)}"
        folder.mkdir()
        return folder

    def lookup(self, key: str) -> tuple[CacheEntry | None, str]:
        """The whole entry for `key`, or None with why not ("" when there is none at all)."""
        folder = self.entries / key
        if not folder.exists():
            return None, ""
        problem = self._problem(folder)
        if problem:
            self.remove(folder)
            return None, f"cache entry {key} was {problem}: removed, rebuilding"
        data = json.loads((folder / ENTRY_FILE).read_text(encoding="utf-8"))
        (folder / USED_FILE).touch()  # its mtime is the entry's last use (LRU)
        return CacheEntry(key, folder, data), ""

    def _problem(self, folder: Path) -> str:
        try:
            data = json.loads((folder / ENTRY_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return "partial (no entry.json)"
        except (OSError, ValueError) as exc:
            return f"corrupt (entry.json unreadable: {exc})"
        if not isinstance(data, dict) or data.get("version") != ENTRY_VERSION or data.get("key") != folder.name:
            return "corrupt (entry.json is not this entry's)"
        if not (folder / LOG_FILE).is_file():
            return "partial (no export.log)"
        if not isinstance(data.get("bytes"), int):
            return "corrupt (its size in entry.json is not a number)"
        if data.get("status") == "passed":
            try:  # the bytes themselves, never the stat-keyed hash cache: a flipped byte keeps size and mtime
                have = _files_of(folder / OUT_DIR, sha256_file)
            except OSError as exc:
                return f"corrupt (unreadable: {exc})"
            if have != data.get("files"):
                return "corrupt (its files differ from entry.json)"
        elif data.get("status") == "failed":
            return _failure_problem(data.get("failure"))
        else:
            return "corrupt (no outcome in entry.json)"
        return ""

    def commit(self, key: str, build_dir: Path, data: Mapping[str, object]) -> CacheEntry:
        """Seal a build: entry.json last, then the folder renamed to entries/<key>. When another
        run sealed the same key meanwhile, its entry is used and this build dropped."""
        files = _files_of(build_dir / OUT_DIR, self.hashes.digest)
        data = {**data, "version": ENTRY_VERSION, "key": key, "files": files,
                "bytes": sum(v[0] for v in files.values()) + (build_dir / LOG_FILE).stat().st_size,
                "created_at": time.time()}
        write_atomic(build_dir / ENTRY_FILE, json.dumps(data, indent=1, sort_keys=True))
        (build_dir / USED_FILE).touch()
        self.entries.mkdir(parents=True, exist_ok=True)
        final = self.entries / key
        if final.exists():
            if not self._problem(final):  # another run sealed the same key meanwhile: theirs is used
                shutil.rmtree(build_dir, ignore_errors=True)
                return CacheEntry(key, final, json.loads((final / ENTRY_FILE).read_text(encoding="utf-8")))
            self.remove(final)  # partial or corrupt: replaced whole
        try:
            os.rename(build_dir, final)
        except OSError:
            shutil.rmtree(build_dir, ignore_errors=True)
            entry, _ = self.lookup(key)
            if entry is None:
                raise
            return entry
        return CacheEntry(key, final, data)

    def remove(self, folder: Path) -> None:
        """Gone at once (renamed into tmp/), then deleted: no reader meets half an entry."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        trash = self.tmp / f"trash.{folder.name}.{secrets.token_hex(3)}"
        try:
            os.rename(folder, trash)
        except FileNotFoundError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    def sweep_tmp(self) -> list[Path]:
        """Builds and trash left by runs that are gone (their pid no longer runs)."""
        swept = []
        for folder in sorted(self.tmp.glob("*")) if self.tmp.is_dir() else []:
            parts = folder.name.split(".")
            pid = int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None
            if pid is not None and (pid == os.getpid() or _pid_alive(pid)):
                continue  # a build of this run or of another one still going
            shutil.rmtree(folder, ignore_errors=True)
            swept.append(folder)
        return swept

    def evict(self, max_bytes: int, keep: set[str]) -> tuple[list[str], list[str]]:
        """Least recently used entries removed until the cache fits `max_bytes`; `keep` (this
        run's) and the entries any live run on this host holds (leases.py) never. Returns the
        removed keys and, for each entry that could not be judged, why (it is left alone)."""
        found, skipped = [], []
        for folder in sorted(self.entries.glob("*")) if self.entries.is_dir() else []:
            try:
                data = json.loads((folder / ENTRY_FILE).read_text(encoding="utf-8"))
                used = (folder / USED_FILE).stat().st_mtime
            except (OSError, ValueError):
                continue  # a partial entry is some other run's build in flight, or lookup's to remove
            size = data.get("bytes") if isinstance(data, dict) else None
            if not isinstance(size, int) or isinstance(size, bool):
                skipped.append(f"{folder / ENTRY_FILE}: no size in bytes; skipped (a lookup of it rebuilds it)")
                continue
            found.append((used, folder.name, size))
        total = sum(size for _, _, size in found)
        removed = []
        held = keep | self.leases.held()
        for _, key, size in sorted(found):
            if total <= max_bytes:
                break
            if key in held:
                continue
            self.remove(self.entries / key)
            total -= size
            removed.append(key)
        return removed, skipped


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
