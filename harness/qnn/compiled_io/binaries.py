"""Which context binaries an export holds, and the target QNN reads from them (provisioning's
guard: every `harness push` runs it, so this module imports only what a remembered read needs;
the host's QAIRT library is loaded on the first file QNN has not judged yet, memo.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.hostfiles import FileKey
from harness.qnn.compiled_io.memo import BinaryRead, ReadMemo, file_key, reader_key
from harness.qnn.host import HostQnn, QnnUnavailable, auto_host_qnn, qairt_tuple

if TYPE_CHECKING:
    from harness.qnn.ctx import QnnSystemLib

_BIN_RE = re.compile(r"^graph(llm|visual)\d+\.bin$")


def binary_files(root: Path, npu_dir: Path | None = None) -> dict[str, list[str]]:
    """kind -> the graph<kind><N>.bin files in <npu_dir>/qnn, as "qnn/..." paths."""
    qdir = (npu_dir or root) / "qnn"
    out: dict[str, list[str]] = {"llm": [], "visual": []}
    # scandir's entries know their type (no stat per file): part of every unchanged re-provision.
    try:
        with os.scandir(qdir) as it:
            entries = sorted((e.name, e) for e in it if _BIN_RE.match(e.name))
    except (FileNotFoundError, NotADirectoryError):
        return out
    for name, entry in entries:
        m = _BIN_RE.match(name)
        if m and entry.is_file():
            out[m.group(1)].append(f"qnn/{name}")
    return out


def open_reader(qnn_sdk: Path | str | None, host: HostQnn | None = None) -> tuple[QnnSystemLib | None, str]:
    """The host's libQnnSystem.so, loaded, and how to describe it; (None, why) without one."""
    from harness.qnn.ctx import ContextBinaryError, system_lib  # ctypes: only where a file must be read

    why = ""
    if host is None:
        host, why = auto_host_qnn(qnn_sdk)
    if host is None:
        return None, f"no host QAIRT library ({why})"
    try:
        lib = system_lib(host)
    except (ContextBinaryError, QnnUnavailable) as exc:
        return None, f"no host QAIRT library ({exc})"
    return lib, f"{lib.describe()}, found via {host.source}"


@dataclass(frozen=True)
class BinariesTarget:
    """What the host's libQnnSystem.so says about every context binary of an export."""

    soc_ids: tuple[int, ...]  # distinct socModels, sorted
    htp_archs: tuple[str, ...]
    builds: tuple[str, ...]  # distinct QAIRT builds that compiled them, sorted
    read: tuple[str, ...]  # the binaries read ("qnn/graphllm0.bin", "model.pte#forward[0]")
    refused: tuple[str, ...]  # QNN's refusals, one message per binary (the file named)
    reader: str

    @property
    def newest_build(self) -> str | None:
        known = [(qairt_tuple(b), b) for b in self.builds]
        ranked = sorted((t, b) for t, b in known if t is not None)
        return ranked[-1][1] if ranked else None


def read_binaries_target(root: Path, qnn_sdk: Path | str | None = None, host_qnn: HostQnn | None = None,
                         programs: Sequence[str] | None = None, *, memo_path: Path | None = None) -> BinariesTarget | None:
    """Every qnn/graph*.bin and the QNN delegates of `programs` (.pte paths relative to root;
    default: every top-level .pte), read by the host's library; None without the library or
    without binaries. A .pte that is not a readable program raises PteError (the file named).
    A file version QNN already read (memo.py: path, size, mtime and the library) is not
    read again; `memo_path` overrides where that memo lives (default: the user's cache folder)."""
    host, _why = (host_qnn, "") if host_qnn is not None else auto_host_qnn(qnn_sdk)
    if host is None:
        return None
    files: list[tuple[str, Path, bool]] = [(rel, root / rel, False) for rels in binary_files(root).values()
                                           for rel in rels]
    ptes = [root / rel for rel in programs] if programs is not None else sorted(root.glob("*.pte"))
    files += [(pte.relative_to(root).as_posix(), pte, True) for pte in ptes if pte.is_file()]
    if not files:
        return None
    rkey = reader_key(host.system_lib)
    memo = ReadMemo(rkey, memo_path) if rkey else None
    try:
        keys: list[FileKey | None] = list(FileKey.of_many([path for _rel, path, _pte in files]))
    except OSError:  # a file went away while listed: read everything, remember nothing
        memo, keys = None, [None] * len(files)
    lib: QnnSystemLib | None = None
    reads: list[BinaryRead] = []
    for (rel, path, is_pte), key in zip(files, keys):
        hit = memo.get(file_key(key)) if memo is not None and key is not None else None
        if hit is None:
            if lib is None:  # ctypes and QNN's library: on the first file not remembered
                lib, _reader = open_reader(qnn_sdk, host)
                if lib is None:
                    return None
            hit = _read_one(lib, rel, path, is_pte)
            if memo is not None and key is not None and _unchanged(path, key):  # not rewritten while read
                memo.put(file_key(key), hit)
        reads += hit
    if memo is not None:
        memo.save()
    if not reads:
        return None
    read = [r for r in reads if not r.refused]
    return BinariesTarget(
        tuple(sorted({r.soc_model for r in read if r.soc_model is not None})),
        tuple(sorted({r.htp_arch for r in read if r.htp_arch is not None})),
        tuple(sorted({r.qairt_build for r in read if r.qairt_build})),
        tuple(r.name for r in read), tuple(r.refused for r in reads if r.refused),
        f"{host.system_lib}, found via {host.source}")


def _unchanged(path: Path, key: FileKey) -> bool:
    try:
        return FileKey.of(path) == key
    except OSError:
        return False


def _read_one(lib: QnnSystemLib, rel: str, path: Path, is_pte: bool) -> list[BinaryRead]:
    """QNN's reading of one file: a context binary, or each QNN delegate of a program."""
    from harness.qnn.ctx import ContextBinaryError
    from harness.qnn.pte import qnn_delegates

    jobs = ([(f"{rel}#{d.method}[{d.index}]", d.offset, d.size) for d in qnn_delegates(path)] if is_pte
            else [(rel, 0, None)])
    out = []
    for name, offset, size in jobs:
        try:
            info = lib.read_file(path, name, offset, size)
        except ContextBinaryError as exc:
            out.append(BinaryRead(name, refused=str(exc)))
            continue
        out.append(BinaryRead(name, info.soc_model, info.htp_arch, info.qairt_build or ""))
    return out


__all__ = ["BinariesTarget", "binary_files", "open_reader", "read_binaries_target"]
