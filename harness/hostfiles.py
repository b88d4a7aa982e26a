"""Files the harness writes on the host, and where its caches live.

Every report, manifest and record file is written so that its final path never holds half
a file: a temp name in the same folder, fsync, rename (`write_atomic`); appends add whole
lines or nothing (`append_whole`). A full disk or a read-only folder is a `HostWriteError`
naming the path, and the file already at the path (or its absence) is left as it was.
Output folders are checked before a night claims a device (`prepare_output_dir`).
The harness's caches live in the user's cache folder (`user_cache_dir`), never beside a
user's files: export and runtime folders are read, never written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HostWriteError, OutputPathError


def checkout_root() -> Path:
    """The folder that holds this `harness` package (found from this file, so a move of the
    module that asks cannot point it elsewhere)."""
    return Path(__file__).resolve().parents[1]


def child_pythonpath(current: str | None) -> str:
    """PYTHONPATH for a host child that must import this checkout's harness, not another install's:
    the checkout first, then the caller's entries."""
    return os.pathsep.join([str(checkout_root()), *[p for p in (current or "").split(os.pathsep) if p]])

_ADVICE = {
    errno.ENOSPC: "no space left on that disk; free some and run again",
    errno.EDQUOT: "disk quota exceeded; free some space and run again",
    errno.EROFS: "the disk is read-only; choose a writable folder",
    errno.EACCES: "permission denied; choose a folder you can write to",
    errno.EPERM: "permission denied; choose a folder you can write to",
    errno.ENOTDIR: "a part of the path is a file, not a folder; choose another path",
    errno.ELOOP: "the path is a symlink loop; fix the link",
}


def _why(exc: OSError) -> str:
    return _ADVICE.get(exc.errno or 0, f"{exc.strerror or exc}; check the path")


def write_error(path: Path, exc: OSError) -> HostWriteError:
    return HostWriteError(f"cannot write {path}: {_why(exc)} (the file there was left as it was)")


def user_cache_dir() -> Path:
    """$HARNESS_CACHE_DIR, else $XDG_CACHE_HOME/harness, else ~/.cache/harness."""
    root = os.environ.get("HARNESS_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "harness")
    return Path(root)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_atomic(path: Path | str, data: str | bytes) -> Path:
    """Write `data` to `path` through a temp name in the same folder, fsync'd, then renamed
    over it. HostWriteError (naming the path) when that fails; the old file stays whole."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        # 0o666 and the umask, as open() gives: reports are read by CI and web servers.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        try:
            _write_all(fd, raw)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise write_error(path, exc) from None
    _fsync_dir(path.parent)
    return path


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (a crash after it keeps the new file)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def append_whole(fd: int, data: bytes, path: Path) -> None:
    """Append `data` to the O_APPEND file `fd` whole or not at all: on a failed write the
    file is cut back to where it ended, so a reader never meets half a line."""
    end = os.fstat(fd).st_size
    try:
        _write_all(fd, data)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, end)
        raise write_error(path, exc) from None


def prepare_output_dir(path: Path | str, what: str) -> Path:
    """Create the folder `path` (with its parents) and prove a file can be made in it.
    OutputPathError naming the path and `what` it is for (e.g. "--out") when a part of it is
    a file, the disk is read-only or permission is denied: found before any work starts."""
    path = Path(path).expanduser()
    blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise OutputPathError(f"{what} {path}: {blocker} is a file, not a folder; choose another folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".harness-write-check.{os.getpid()}.{secrets.token_hex(4)}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        os.unlink(probe)
    except OSError as exc:
        raise OutputPathError(f"{what} {path}: cannot write there: {_why(exc)}") from None
    return path




@dataclass(frozen=True)
class FileKey:
    """What identifies one version of a local file without reading it (the hash cache's and
    the QNN read memo's key)."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileKey:
        st = path.stat()
        return cls(str(path.resolve()), st.st_size, st.st_mtime_ns)

    @classmethod
    def of_many(cls, paths: Sequence[Path]) -> list[FileKey]:
        """FileKey.of for each path, resolving each folder once: a resolve per file costs an
        lstat per path component (~1.5 ms for an export of 40 files, a tenth of an
        unchanged re-provision). Only a symlink itself is resolved on its own."""
        real_dirs: dict[str, str] = {}
        out = []
        for path in paths:
            folder, name = os.path.split(os.path.abspath(path))
            real_dir = real_dirs.get(folder)
            if real_dir is None:
                real_dir = real_dirs[folder] = os.path.realpath(folder)
            lst = os.lstat(path)
            if stat.S_ISLNK(lst.st_mode) or ".." in os.fspath(path).split(os.sep):  # `..` after a link: resolve's
                out.append(cls.of(Path(path)))
            else:
                out.append(cls(os.path.join(real_dir, name), lst.st_size, lst.st_mtime_ns))
        return out


__all__ = ["FileKey", "append_whole", "prepare_output_dir", "user_cache_dir", "write_atomic", "write_error"]
