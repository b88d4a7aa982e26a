"""The files of a folder to push (an export or a runtime), listed on the host with the rule for
what leaves it: names without control characters, readable regular files, and symlinks that stay
inside the folder unless the caller opts in (the rule in harness.provision.artifacts' docstring)."""

from __future__ import annotations

import logging
import os
import re
import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ArtifactError
from harness.provision.manifest import LOCAL_MANIFEST_NAME

_BAD_NAME = re.compile(r"[\x00-\x1f\x7f]")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArtifactFile:
    rel: str  # POSIX path relative to the set's root; also its path on the device
    path: Path  # local file
    size: int
    mode: int  # permission bits to give it on the device


def _check_link(p: Path, real_root: str, what: str) -> None:
    """Refuse symlink `p` when it resolves outside `real_root` (see the module's rule)."""
    target = os.path.realpath(p)
    if os.path.commonpath([target, real_root]) != real_root:
        raise ArtifactError(
            f"{p}: symlink to {target}, outside the {what} {real_root}; files from outside are not pushed. "
            "Copy the file into the folder, or pass follow_external_links=True to follow such links")


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.walk's surrogate escapes of bytes that are not UTF-8
        return False
    return True


def _kind(mode: int) -> str:
    if stat_mod.S_ISFIFO(mode):
        return "a FIFO"
    if stat_mod.S_ISSOCK(mode):
        return "a socket"
    return "a device node" if stat_mod.S_ISCHR(mode) or stat_mod.S_ISBLK(mode) else "a special file"


def list_files(root: Path, *, exclude_hidden_harness: bool = True,
               follow_external_links: bool = True) -> list[ArtifactFile]:
    """Every regular file under root (symlinks followed), in a stable order. With
    follow_external_links=False (exports) a link that resolves outside root is refused."""
    out: list[ArtifactFile] = []
    real_root = os.path.realpath(root)
    # Names as strings (os.path), a Path only for each file's `path`: pathlib per name cost
    # half of an unchanged re-provision's ~10 ms (benchmarks/provision.py).
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        real_dir = os.path.realpath(dirpath)
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        for d in dirnames:
            sub = Path(dirpath) / d
            if sub.is_symlink():
                if not follow_external_links:
                    _check_link(sub, real_root, "export")
                target = os.path.realpath(sub)
                if os.path.commonpath([target, real_dir]) == target:
                    raise ArtifactError(f"{sub}: folder symlink to its own ancestor {target} (a loop); remove it")
        for name in sorted(filenames):
            if exclude_hidden_harness and (name.startswith(LOCAL_MANIFEST_NAME) or name.endswith(".pyc")):
                continue
            p = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if _BAD_NAME.search(rel):
                raise ArtifactError(f"{p}: the file name holds a control character (e.g. a newline); rename it")
            if not _utf8(rel):  # a device path and every device command are UTF-8 text
                raise ArtifactError(f"{os.fsencode(p)!r}: the file name is not UTF-8; rename it")
            try:
                st = os.stat(p)
            except OSError as exc:
                raise ArtifactError(f"{p}: cannot read ({exc}); a dangling symlink? fix or remove it") from None
            if not stat_mod.S_ISREG(st.st_mode):
                if not stat_mod.S_ISDIR(st.st_mode):  # a FIFO, a socket, a device node: not data to push
                    _log.warning("harness: %s is %s, not a regular file: left out of the push", p, _kind(st.st_mode))
                continue
            if not follow_external_links and os.path.islink(p):
                _check_link(Path(p), real_root, "export")
            if not os.access(p, os.R_OK):
                raise ArtifactError(f"{p}: not readable; fix its permissions")
            out.append(ArtifactFile(rel, Path(p), st.st_size, stat_mod.S_IMODE(st.st_mode) | 0o644))
    return out


__all__ = ["ArtifactFile", "list_files"]
