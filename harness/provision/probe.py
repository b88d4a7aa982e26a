"""What the device already holds for a sync, read from one probe (PROBE_SCRIPT's output):
this set's manifest, the files of this set and every content anywhere on the device that is
still exactly as its manifest (or the resume journal) recorded it."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from harness.errors import ProvisionError
from harness.provision.layout import DeviceLayout
from harness.provision.manifest import DeviceStamp, Manifest
from harness.provision.scripts import RemoteStatLine, parse_manifest_lines, parse_stat_lines, split_sections


@dataclass(frozen=True)
class Placed:
    """A file known to be on the device with a given content, verified by its stamp."""

    path: str  # absolute device path
    sha256: str
    size: int
    mode: int  # as the device reports it now
    stamp: DeviceStamp


@dataclass
class Probe:
    manifest: Manifest | None  # this set's
    mine: dict[str, Placed]  # rel -> verified file of this set (manifest or journal)
    contents: dict[str, Placed]  # sha -> a verified file anywhere on the device
    files: dict[str, RemoteStatLine]  # absolute path -> stat


def _verified(path: str, sha: str, size: int, stamp: DeviceStamp,
              files: dict[str, RemoteStatLine]) -> Placed | None:
    st = files.get(path)
    if st is None or st.size != size or st.inode != stamp.inode or st.mtime != stamp.mtime:
        return None
    return Placed(path, sha, size, st.mode, stamp)


def parse_probe(text: str, layout: DeviceLayout, where: str) -> Probe:
    sec = split_sections(text)
    if "end" not in sec:
        raise ProvisionError(f"{where}: the device shell did not run the probe script (output: "
                             f"{text.strip()[:200]!r}); check that `sh`, `find`, `stat` and `grep` exist there")
    files = {st.path: st for st in parse_stat_lines(sec.get("files", []))}
    own: Manifest | None = None
    contents: dict[str, Placed] = {}
    mine: dict[str, Placed] = {}
    for path, m in parse_manifest_lines(sec.get("manifests", []), where):
        if isinstance(m, ProvisionError):
            continue  # a damaged manifest: its files are simply not trusted
        is_mine = path == layout.manifest
        if is_mine:
            own = m
        for rel, entry in m.files.items():
            stamp = m.device.get(rel)
            if stamp is None:
                continue
            p = _verified(posixpath.join(m.remote_dir, rel), entry.sha256, entry.size, stamp, files)
            if p is None:
                continue
            contents.setdefault(p.sha256, p)
            if is_mine:
                mine[rel] = p
    prefix = layout.set_dir.rstrip("/") + "/"
    for line in sec.get("journal", []):
        parts = line.split(" ", 4)
        if len(parts) != 5 or not all(x.isdigit() for x in parts[1:4]):
            continue
        sha, ino, size, mtime, rel = parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4]
        rel = rel[2:] if rel.startswith("./") else rel  # PLACE_SCRIPT journals "./rel"
        p = _verified(prefix + rel, sha, size, DeviceStamp(ino, mtime), files)
        if p is not None:
            mine[rel] = p  # a later journal line wins over the manifest: it was placed after it
            contents.setdefault(sha, p)
    return Probe(manifest=own, mine=mine, contents=contents, files=files)



__all__ = ["Placed", "Probe", "parse_probe"]
