"""Local sha256 cache keyed by (path, size, mtime_ns), so unchanged gigabytes are never re-hashed.

One JSON file per cache. Saving merges with what another process wrote meanwhile (under a
file lock), so parallel harness runs sharing the cache do not lose each other's entries.
The lock is flock(2) from the standard library: the `filelock` package costs ~0.05 s of
imports, a sixth of a `harness push` start-up (benchmarks/provision.py profile).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import ProvisionError
from harness.hostfiles import FileKey, user_cache_dir

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

_LOCK_TIMEOUT_S = 60
_log = logging.getLogger(__name__)

_CHUNK = 8 << 20  # large reads: hashlib releases the GIL, so a hashing thread runs beside a push
_VERSION = 1


def default_cache_path() -> Path:
    """hashes.json in the user's cache folder (harness/hostfiles.py `user_cache_dir`)."""
    return user_cache_dir() / "hashes.json"


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            if progress is not None:
                progress(len(chunk))
    return h.hexdigest()


class HashCache:
    """sha256 per (path, size, mtime_ns). `path=None` keeps it in memory only."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self._entries: dict[str, tuple[int, int, str]] = {}
        self._dirty: set[str] = set()
        self._lock = threading.Lock()
        self.hashed_bytes = 0  # bytes actually read for hashing (tests and benchmarks look at it)
        if path is not None:
            self._entries.update(self._read(path))

    @staticmethod
    def _read(path: Path) -> dict[str, tuple[int, int, str]]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # a missing or corrupt cache only costs re-hashing
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return {}
        out = {}
        for p, v in (data.get("files") or {}).items():
            if isinstance(v, list) and len(v) == 3:
                out[p] = (int(v[0]), int(v[1]), str(v[2]))
        return out

    def lookup(self, key: FileKey) -> str | None:
        with self._lock:
            hit = self._entries.get(key.path)
        if hit and hit[0] == key.size and hit[1] == key.mtime_ns:
            return hit[2]
        return None

    def remember(self, key: FileKey, sha: str) -> None:
        with self._lock:
            self._entries[key.path] = (key.size, key.mtime_ns, sha)
            self._dirty.add(key.path)

    def digest(self, path: Path, progress: Callable[[int], None] | None = None) -> str:
        """sha256 of `path`, read from the cache when size and mtime are unchanged."""
        key = FileKey.of(path)
        sha = self.lookup(key)
        if sha is not None:
            return sha
        sha = sha256_file(path, progress)
        with self._lock:
            self.hashed_bytes += key.size
        # A file rewritten while we read it keeps no cache entry (its key no longer matches).
        if FileKey.of(path) == key:
            self.remember(key, sha)
        return sha

    def save(self) -> None:
        """Merge this run's hashes into the file. A cache that cannot be written (a folder in its
        place, a full disk, a read-only home) costs only re-hashing next time: said, never fatal."""
        if self.path is None or not self._dirty:
            return
        tmp = self.path.with_name(self.path.name + f".tmp{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(Path(str(self.path) + ".lock")):
                self._merge_into(tmp)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            _log.warning("harness: the hash cache %s was not saved (%s); unchanged files will be hashed again "
                         "next time (set HARNESS_CACHE_DIR to a writable folder)", self.path, exc.strerror or exc)

    def _merge_into(self, tmp: Path) -> None:
        merged = self._read(self.path) if self.path is not None else {}
        with self._lock:
            for p in self._dirty:
                merged[p] = self._entries[p]
            self._dirty.clear()
        # Forget files that no longer exist, so the cache does not grow forever.
        merged = {p: v for p, v in merged.items() if os.path.exists(p)}
        tmp.write_text(json.dumps({"version": _VERSION, "files": {p: list(v) for p, v in merged.items()}}),
                       encoding="utf-8")
        os.replace(tmp, str(self.path))


class BackgroundHasher:
    """`cache.digest` of files on two threads, started on first use: concurrent.futures costs
    ~8 ms of a `harness push` start-up, and a first push over adb never needs it (the
    transport hashes what it sends)."""

    def __init__(self, cache: HashCache):
        self.cache = cache
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, path: Path) -> Future[str]:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="provision-hash")
        return self._pool.submit(self.cache.digest, path)

    def shutdown(self) -> None:
        """Wait for the hash being read; never start the queued ones (after a failure nobody
        needs gigabytes hashed; what was hashed stays in the cache)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on `path` (created if missing), waited for up to a minute."""
    with open(path, "a") as fh:
        deadline = time.monotonic() + _LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ProvisionError(f"{path}: held by another harness process for {_LOCK_TIMEOUT_S} s; "
                                       "remove the file if no harness runs") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def default_cache() -> HashCache:
    """The per-user cache shared by every harness run on this host."""
    return HashCache(default_cache_path())


__all__ = ["BackgroundHasher", "HashCache", "default_cache", "default_cache_path", "sha256_file"]
