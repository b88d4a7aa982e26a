"""The last device command of a sync (harness.provision.sync): the push's last batch placed,
contents linked, stale files dropped, every stamp read back and the manifest published."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path

from harness.errors import ProvisionError
from harness.provision.manifest import DeviceStamp, Manifest
from harness.provision.plan import Item, Plan
from harness.provision.scripts import (
    COMMIT_SCRIPT,
    PUBLISH_INLINE_SCRIPT,
    PUBLISH_SCRIPT,
    RemoteStatLine,
    parse_stat_lines,
    split_sections,
)
from harness.provision.session import MAX_COMMAND, SyncSession
from harness.transport import RemoteStat

MAX_INLINE_MANIFEST = 64 << 10  # larger manifests are pushed as a file


def commit_set(s: SyncSession, plan: Plan, items: list[Item], manifest: Manifest, fresh: bool) -> None:
    """Place the push's last batch (`s.final`), link contents found elsewhere, drop stale
    files and publish the manifest, in one command, then read back every file's stamp.
    `fresh`: the set folder held no file before (no empty folder of ours to look for). The
    manifest is written with the stamps the files must have (kept, placed or hard-linked: the inode and mtime are known); if the device
    reports others (e.g. `ln` fell back to a copy), a corrected manifest replaces it. A wrong
    stamp is harmless anyway: it only makes the next run re-check that file."""
    L = s.layout
    predicted: dict[str, DeviceStamp] = {rel: p.stamp for rel, p in plan.keep.items()}
    predicted.update({it.file.rel: placed.stamp for it, placed in plan.link})
    predicted.update(s.placed_stamps)
    manifest.device = dict(predicted)
    text = manifest.to_json() if len(predicted) == len(items) else ""
    inline = text if len(text) <= MAX_INLINE_MANIFEST else ""
    # Links, mode changes and removals, in as many commands as MAX_COMMAND needs (one, unless
    # thousands of files changed); the last one also writes the manifest. Each is a group of
    # whole argv elements: (source, rel), (mode, rel) or (rel,).
    work = ([("link", (placed.path, it.file.rel)) for it, placed in plan.link]
            + [("chmod", (f"{mode:o}", rel)) for rel, mode in sorted(plan.chmod.items())]
            + [("stale", (rel,)) for rel in plan.stale])
    chunks: list[list[tuple[str, tuple[str, ...]]]] = [[]]
    size = 0
    for op in work:
        cost = sum(len(x.encode()) + 3 for x in op[1])
        if chunks[-1] and size + cost > MAX_COMMAND:
            chunks.append([])
            size = 0
        chunks[-1].append(op)
        size += cost
    out = ""
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        links = [x for kind, group in chunk if kind == "link" for x in group]
        chmods = [x for kind, group in chunk if kind == "chmod" for x in group]
        stale = [x for kind, group in chunk if kind == "stale" for x in group]
        flags = (("p" if s.final and i == 0 else "") + ("e" if last and not fresh else "")
                 + ("r" if last and not s.final else ""))
        out = s.script(COMMIT_SCRIPT, [L.set_dir, posixpath.dirname(L.manifest), L.manifest, inline if last else "",
                                       L.journal, s.run_dir, flags, str(len(links) // 2), str(len(chmods) // 2),
                                       *links, *chmods, *stale],
                       what=f"putting files in place in {L.set_dir}")
    stats: Mapping[str, RemoteStatLine | RemoteStat | None]
    if s.final:  # the link's stats carry inodes (sync._arrived): read back over the file protocol
        remote = {it.file.rel: posixpath.join(L.set_dir, it.file.rel) for it in items}
        s.round_trips += 1
        got = s.t.stat_many(list(remote.values()))
        stats = {rel: got[path] for rel, path in remote.items()}
    else:
        prefix = L.set_dir.rstrip("/") + "/"
        stats = {st.path[len(prefix):]: st for st in parse_stat_lines(split_sections(out).get("stat", []))
                 if st.path.startswith(prefix)}
    stamps = {}
    for it in items:
        st = stats.get(it.file.rel)
        if st is None or st.size != it.file.size:
            raise ProvisionError(f"{s.device.name}: {L.set_dir}/{it.file.rel} is not in place after pushing "
                                 f"(device says {st.size if st else 'missing'}, want {it.file.size} bytes); "
                                 "provision again")
        stamps[it.file.rel] = DeviceStamp(st.inode, st.mtime)
    manifest.device = stamps
    if not inline or "@@published" not in out.split("\n") or stamps != predicted:
        publish(s, manifest)


def publish(s: SyncSession, manifest: Manifest) -> None:
    """The manifest goes last: written under a temporary name, renamed over the old one."""
    L = s.layout
    text = manifest.to_json()
    if len(text) <= MAX_INLINE_MANIFEST:
        s.script(PUBLISH_INLINE_SCRIPT, [L.manifest, text, L.journal, s.run_dir], what="writing the manifest")
        return
    tmp_remote = f"{L.manifest}.{posixpath.basename(s.run_dir)}.tmp"
    import tempfile  # only for manifests over 64 KiB

    with tempfile.TemporaryDirectory(prefix="harness-manifest-") as d:
        local = Path(d) / "manifest.json"
        local.write_text(text, encoding="utf-8")
        s.round_trips += 1
        s.t.push(local, tmp_remote, mode=0o644)
    s.script(PUBLISH_SCRIPT, [tmp_remote, L.manifest, L.journal, s.run_dir], what="writing the manifest")


__all__ = ["MAX_INLINE_MANIFEST", "commit_set", "publish"]
