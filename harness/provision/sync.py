"""The sync engine: content-addressed, incremental, atomic push of a file set to a device,
into the layout of harness.provision.layout, by the scripts of harness.provision.scripts.

Content addressing without a second name per file: every manifest records each file's
sha256, so a content already on the device (in any set) is found through the manifests and
hard-linked into place instead of pushed. Equal contents are one inode, stored once, and a
file's storage is freed when its last set lets go of it (no blob store to collect).

Cheap when nothing changed: one shell round trip (the *probe*) prints the manifests and a
`stat` of every provisioned file. A file is unchanged when its local sha256 (from the hash
cache keyed by path/size/mtime: no re-hash) equals the manifest's and its device stat (inode,
size, mtime) equals the stamp recorded when it was put in place. Nothing is re-read on the
device, and the device runs a fixed number of processes whatever the number of files.

Atomic: a pushed file gets its real name only after its size (and with verify="sha256" its
hash) was checked on the device (the size over the file protocol where its stats carry
inodes: no device process); it is then hard-linked into place by one `cp -al` (an existing
name is unlinked and linked again: never a truncated file under a real name), or, for a set
that does not exist yet, the run folder holding the last batch is renamed into place. An
interrupted run leaves files under `.incoming/` (removed by a later run) and a journal of
what it already placed, so the next run resumes there. Device-side hashing reads every
pushed byte again on the device; the default checks sizes and trusts the link's integrity
(adb over USB has CRC'd bulk transfers, TCP and SSH their own checksums/MACs): the failure
that really happens is a truncated file, which the size catches.

A first push: one probe before the first byte; every file's bytes read once (the transport
hashes what it sends, plan.undecided files are hashed while the others travel); one command
after each batch but the last, whose placing goes with the commit.

Hard links work on Android /data (ext4/f2fs, files owned by shell) and inside the virtual
device (one bubblewrap bind of a host folder is one mount); `cp -al` is toybox and GNU cp.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

from harness.errors import HarnessError, ProvisionError, RemoteNoSpaceError, TransportError
from harness.hostfiles import FileKey
from harness.provision.commit import commit_set, publish
from harness.provision.hashcache import BackgroundHasher, HashCache
from harness.provision.layout import KIND_DIRS, DeviceLayout, safe_name
from harness.provision.manifest import DeviceStamp, FileEntry, Manifest
from harness.provision.plan import Item, Plan, blocking_rels, decide, make_plan, moved_sources
from harness.provision.probe import Probe
from harness.provision.progress import NullProgress, Progress, human_bytes
from harness.provision.scripts import MAKE_ROOM_SCRIPT, PLACE_CHECKED_SCRIPT, PLACE_SCRIPT
from harness.provision.session import MAX_COMMAND, SyncSession
from harness.provision.setfiles import ArtifactFile
from harness.transport import SyncsSets

FLUSH_BYTES = 256 << 20  # place verified files at least this often: a crash re-sends < this much


@dataclass
class SyncResult:
    remote_dir: str
    manifest: Manifest
    bytes_sent: int = 0
    files_sent: int = 0
    files_linked: int = 0
    files_removed: int = 0
    round_trips: int = 0
    hashed_bytes: int = 0

    @property
    def unchanged(self) -> bool:
        return self.files_sent == 0 and self.files_linked == 0 and self.files_removed == 0


def sync_set(
    transport: SyncsSets,
    files: Sequence[ArtifactFile],
    *,
    kind: str,
    name: str,
    meta: Mapping[str, object] | None = None,
    cache: HashCache | None = None,
    progress: Progress | None = None,
    verify: str = "size",
    maybe_unchanged: bool = True,
    on_manifest: Callable[[Manifest], None] | None = None,
    preflight_reads: Sequence[str] = (),
    preflight: Callable[[Mapping[str, bytes | None]], None] | None = None,
) -> SyncResult:
    """Make `<work_dir>/<kind>s/<name>` on the device hold exactly `files`; push only what
    the device does not already hold (in this set or any other). `maybe_unchanged=False`
    (nothing says the device holds this set: a first push) skips the check over the file
    protocol, so the device is asked one round trip, the probe, before the first byte.
    `on_manifest(manifest)` (files and hashes; e.g. the host's record of the folder) runs
    while the device commits. `preflight(contents of preflight_reads)` runs before a byte
    moves (it may refuse), those files read in the sync's first round trip."""
    if kind not in KIND_DIRS:
        raise ValueError(f"kind must be one of {sorted(KIND_DIRS)}, not {kind!r}")
    cache = cache if cache is not None else HashCache()
    progress = progress or NullProgress()
    layout = DeviceLayout(transport.device.work_dir, kind, safe_name(name))
    s = SyncSession(transport, layout, cache, progress, verify)
    items = [Item(f, key) for f, key in zip(files, FileKey.of_many([f.path for f in files]))]
    hashed_before = cache.hashed_bytes
    checked: list[bool] = []

    def check(blobs: Mapping[str, bytes | None]) -> None:
        checked.append(True)
        if preflight is not None:
            preflight(blobs)

    fast = _unchanged_by_file_protocol(s, items, meta or {}, preflight_reads, check) if maybe_unchanged else None
    if not checked:  # a first push, or the file protocol failed: read them on their own
        check(transport.read_small_files(list(preflight_reads)) if preflight_reads else {})
    local_writes = [cache.save]  # host files written while the device works
    if fast is not None:
        _host_writes(local_writes, on_manifest, fast.manifest)
        fast.hashed_bytes = cache.hashed_bytes - hashed_before
        return fast
    hasher = BackgroundHasher(cache)
    try:
        probe = s.probe(items)
        plan = make_plan(items, probe, cache, hasher.submit, layout.set_dir)
        if not plan.undecided:
            _make_room(s, plan, items, probe)
        pushed = _push_all(s, plan, items, probe, hasher)  # settles plan.undecided before placing
    except BaseException:
        hasher.shutdown()
        cache.save()  # what was hashed stays known
        raise
    hasher.shutdown()
    manifest = Manifest(kind=kind, name=layout.name, remote_dir=layout.set_dir, meta=dict(meta or {}),
                        files={it.file.rel: FileEntry(it.file.rel, it.sha or "", it.file.size, it.file.mode)
                               for it in items})
    result = SyncResult(remote_dir=layout.set_dir, manifest=manifest, bytes_sent=pushed,
                        files_sent=len(plan.push), files_linked=len(plan.link), files_removed=len(plan.stale))
    own = probe.manifest
    complete = (own is not None and len(plan.keep) == len(items) and not plan.stale and not plan.chmod
                and all(own.device.get(rel) == p.stamp for rel, p in plan.keep.items()))
    if own is None or not complete:
        prefix = layout.set_dir.rstrip("/") + "/"
        fresh = own is None and not any(p.startswith(prefix) for p in probe.files)
        errors: list[BaseException] = []
        writes = threading.Thread(target=_host_writes, args=(local_writes, on_manifest, manifest, errors),
                                  name="provision-host-writes")
        writes.start()
        try:
            commit_set(s, plan, items, manifest, fresh=fresh)
        finally:
            writes.join()
        if errors:
            raise errors[0]
    else:
        manifest.device = {rel: p.stamp for rel, p in plan.keep.items()}
        if own.to_json() != manifest.to_json():  # same files, new meta
            publish(s, manifest)
        _host_writes(local_writes, on_manifest, manifest)
    result.round_trips = s.round_trips
    result.hashed_bytes = cache.hashed_bytes - hashed_before
    return result


def _host_writes(writes: list[Callable[[], None]], on_manifest: Callable[[Manifest], None] | None,
                 manifest: Manifest, errors: list[BaseException] | None = None) -> None:
    """The host's own files (hash cache, the caller's record); on a helper thread while the
    device commits (their fsyncs cost a loaded disk ~10 ms), `errors` then takes the failure."""
    try:
        for write in writes:
            write()
        if on_manifest is not None:
            on_manifest(manifest)
    except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
        if errors is None:
            raise
        errors.append(exc)


def _unchanged_by_file_protocol(s: SyncSession, items: list[Item], meta: Mapping[str, object], extra_reads: Sequence[str],
                                on_read: Callable[[Mapping[str, bytes | None]], None]) -> SyncResult | None:
    """The nightly common case without any device process: the set's manifest (read over the
    transport's file protocol) names exactly these contents, and every device file still has
    the inode, size and mtime recorded when it was placed and at least the local mode bits.
    Any doubt (journal, other meta, a changed or unknown stamp) returns None: the full probe
    decides then."""
    L = s.layout
    local = {it.file.rel: it for it in items}
    remote = {rel: posixpath.join(L.set_dir, rel) for rel in local}
    try:
        # The set's files are stat'ed in the same round trip as the manifest is found: most
        # nights nothing changed and every one of those stats is needed.
        blobs, stats = s.t.read_and_stat([L.manifest, L.journal, *extra_reads], list(remote.values()))
    except TransportError:
        return None
    on_read(blobs)  # the caller's files, read in the same round trip (the load preflight)
    raw = blobs.get(L.manifest)
    if raw is None or blobs.get(L.journal) is not None:
        return None
    try:
        manifest = Manifest.from_json(raw.decode("utf-8"), L.manifest)
    except (ProvisionError, ValueError):
        return None
    if manifest.meta != meta or manifest.remote_dir != L.set_dir or set(manifest.files) != set(local):
        return None
    for rel, it in local.items():
        entry = manifest.files[rel]
        if entry.size != it.file.size or entry.mode != it.file.mode or rel not in manifest.device:
            return None
        it.sha = s.cache.lookup(it.key) or s.cache.digest(it.file.path)
        if it.sha != entry.sha256:
            return None
    for rel, it in local.items():
        st, stamp = stats.get(remote[rel]), manifest.device[rel]
        if (st is None or not st.inode or st.inode != stamp.inode or st.mtime != stamp.mtime
                or st.size != it.file.size or it.file.mode & ~st.mode & 0o7777):
            return None
    return SyncResult(remote_dir=L.set_dir, manifest=manifest)


def _make_room(s: SyncSession, plan: Plan, items: list[Item], probe: Probe) -> None:
    """When the sync reshapes the set: keep contents that move between its names (see
    moved_sources) under the run's `.src` folder and link from there (the stamp stays: a
    hard link is the same inode), then clear what stands in the new tree's way."""
    prefix = s.layout.set_dir.rstrip("/") + "/"
    cleared = blocking_rels(plan, items, (p[len(prefix):] for p in probe.files if p.startswith(prefix)))
    moved = moved_sources(plan, s.layout.set_dir, cleared)
    if not moved and not cleared:
        return
    keep_dir = s.run_dir + ".src"
    saved = {path: posixpath.join(keep_dir, str(i)) for i, path in enumerate(moved)}
    pairs = [(path, saved[path]) for path in moved]
    # Chunks of 256 pairs / 512 names of device paths stay well under MAX_COMMAND.
    for start in range(0, max(len(pairs), 1), 256):
        chunk = pairs[start:start + 256]
        last = start + 256 >= len(pairs)
        s.script(MAKE_ROOM_SCRIPT, [keep_dir, s.layout.set_dir, str(len(chunk)), *[x for p in chunk for x in p],
                                    *(cleared[:512] if last else [])],
                 what=f"reshaping {s.layout.set_dir}")
    for start in range(512, len(cleared), 512):
        s.script(MAKE_ROOM_SCRIPT, [keep_dir, s.layout.set_dir, "0", *cleared[start:start + 512]],
                 what=f"reshaping {s.layout.set_dir}")
    plan.link = [(it, replace(placed, path=saved[placed.path]) if placed.path in saved else placed)
                 for it, placed in plan.link]


def _settle(s: SyncSession, plan: Plan, items: list[Item], probe: Probe) -> list[Item]:
    """Decide the files hashed while the first batch travelled, then make room: before
    anything is placed. Returns the files to push after all."""
    more = decide(plan, probe)
    _make_room(s, plan, items, probe)
    return more


def _check_space(s: SyncSession, todo: list[Item]) -> None:
    L, dev = s.layout, s.device
    need = sum(it.file.size for it in todo)
    if s.df_free is None or not s.t.free_bytes_is_df:
        s.round_trips += 1
        s.df_free = s.t.free_bytes(L.work_dir)  # else the probe's df said it, one round trip less
    margin = 1 << 20  # manifests, journal, directory blocks
    if need + margin > s.df_free:
        raise RemoteNoSpaceError(
            f"{dev.name}: not enough space in {L.work_dir} for {L.kind} {L.name!r}: need {human_bytes(need)} "
            f"({need} bytes, {len(todo)} files), {human_bytes(s.df_free)} ({s.df_free} bytes) free; free space on "
            f"the device (e.g. remove unused sets under {L.work_dir}/models) and provision again")


def _push_all(s: SyncSession, plan: Plan, items: list[Item], probe: Probe, hasher: BackgroundHasher) -> int:
    """Push plan.push in batches, placing each; files still being hashed (plan.undecided) are
    decided after the first batch was sent (the hashing runs meanwhile) and pushed after it."""
    if plan.undecided and not plan.push:
        _settle(s, plan, items, probe)  # nothing sure to be sent meanwhile
    todo = plan.push
    if not todo:
        return 0
    L, dev = s.layout, s.device
    if not s.prepared:
        s.prepare(todo)
    _check_space(s, todo)
    # Unknown contents are hashed from the very chunks the transport sends (one read of each
    # file) where it can; elsewhere in the background, in push order, while the link works.
    inline_hash = getattr(s.t, "hashes_while_pushing", False)
    for it in todo:
        if it.sha is None and not inline_hash:
            it.hash_future = hasher.submit(it.file.path)
    need = sum(it.file.size for it in [*todo, *plan.undecided])  # at most: undecided ones may be linked
    s.progress.start(f"{dev.name}: {L.kind} {L.name}", need, len(todo) + len(plan.undecided))
    pending: list[Item] = []
    partials: list[Item] = []  # pushed but not confirmed (or changed): never placed
    sent = 0
    try:
        # Batches hold one place command's worth of files; each goes over the link back to back.
        queue = list(todo)
        while queue:
            batch = _take_batch(queue)
            by_remote = {posixpath.join(s.run_dir, it.file.rel): it for it in batch}
            arrived: list[Item] = []

            # The callbacks run only while this batch's push_many call runs (B023 does not apply).
            def confirmed(remote: str) -> None:
                arrived.append(by_remote[remote])  # noqa: B023
                s.progress.file_done(by_remote[remote].file.rel)  # noqa: B023

            def hashed(remote: str, sha: str) -> None:
                it = by_remote[remote]  # noqa: B023
                if it.sha is None:
                    it.sha = sha
                    s.cache.remember(it.key, sha)  # checked against a changed file below

            hash_kw: dict[str, Any] = {"on_digest": hashed} if inline_hash and any(
                it.sha is None for it in batch) else {}
            try:
                sent += s.t.push_many([(it.file.path, r, it.file.mode) for r, it in by_remote.items()],
                                      progress=s.progress.advance, on_done=confirmed, **hash_kw)
            except (TransportError, ProvisionError):
                pending = arrived  # what the device confirmed is placed; the rest is re-sent
                partials = [it for it in batch if it not in arrived]
                for it in pending:
                    if it.hash_future is not None:
                        it.sha = it.hash_future.result()
                raise
            for i, it in enumerate(batch):
                partials, pending = [it], batch[:i]  # on a change below: keep the checked ones
                if FileKey.of(it.file.path) != it.key:
                    raise ProvisionError(f"{it.file.path}: changed while it was being pushed to {dev.name}; "
                                         "wait until it is written completely and provision again")
                if it.hash_future is not None:
                    it.sha = it.hash_future.result()
            partials, pending = [], []
            if plan.undecided:
                queue += _settle(s, plan, items, probe)
                _check_space(s, todo)  # todo is plan.push, now with them
            _put_in_place(s, batch, last=not queue)
    except (TransportError, ProvisionError) as exc:
        _salvage(s, pending, partials)
        hint = (f" ({s.placed} of {len(todo)} files are safely on the device; provisioning again resumes "
                "from there)")
        if isinstance(exc, RemoteNoSpaceError):
            # The pre-check's figure is stale by now (something else filled the disk): ask again.
            now = _free_now(s)
            left = f"{human_bytes(now)} ({now} bytes) free now" if now is not None else "free space unknown"
            raise RemoteNoSpaceError(f"{dev.name}: no space left while pushing {L.kind} {L.name!r}: needed "
                                     f"{need} bytes, {left} ({exc}); free space and provision again{hint}") from None
        raise type(exc)(f"{exc}{hint}") from None
    s.progress.finish(f"{dev.name}: {L.kind} {L.name}: {len(todo)} files, {human_bytes(sent)} pushed")
    return sent


def _free_now(s: SyncSession) -> int | None:
    try:
        return s.t.free_bytes(s.layout.work_dir)
    except HarnessError:  # a best-effort figure for the message; the failure is reported anyway
        return None


def _take_batch(queue: list[Item]) -> list[Item]:
    """The next files to push from the front of `queue`: one place command's worth, so the run
    folder never holds more than FLUSH_BYTES / MAX_COMMAND of unplaced files."""
    size = args = n = 0
    while n < len(queue) and size < FLUSH_BYTES and args < MAX_COMMAND:
        size += queue[n].file.size
        args += _arg_cost(queue[n])
        n += 1
    batch = queue[:n]
    del queue[:n]
    return batch


def _salvage(s: SyncSession, pending: list[Item], partials: list[Item]) -> None:
    """After a failure: drop the files that may be partial and place what fully arrived (that
    is what makes the next run resume). Best effort: the link may be gone; the next run then
    re-sends those files, and the leftovers under .incoming never get a real name."""
    try:
        if len(partials) > 1:
            s.t.remove(*[posixpath.join(s.run_dir, it.file.rel) for it in partials])
            partials = []
        _place(s, [it for it in pending if it.sha], discard=partials[0].file.rel if partials else "")
    except Exception:  # noqa: BLE001 - the original error is the one to report
        pass


def _arrived(s: SyncSession, batch: list[Item]) -> dict[str, DeviceStamp] | None:
    """Each file of `batch` checked in the run folder as PLACE_SCRIPT checks it (its size), over
    the file protocol (no device process); their stamps. None where the link's stats carry no
    inode (SFTP): PLACE_SCRIPT checks and places the batch then."""
    remote = [posixpath.join(s.run_dir, it.file.rel) for it in batch]
    s.round_trips += 1
    stats = s.t.stat_many(remote)
    if any(st is not None and not st.inode for st in stats.values()):
        return None
    stamps = {}
    for it, path in zip(batch, remote):
        st = stats.get(path)
        if st is None or st.size != it.file.size:
            with suppress(HarnessError):  # the next run sends it again either way
                s.t.remove(path)
            raise ProvisionError(f"{s.device.name}: a pushed file did not arrive intact and was discarded "
                                 f"(BAD {it.file.rel} size: {st.size if st else 'missing'}, want {it.file.size}); "
                                 "provision again")
        stamps[it.file.rel] = DeviceStamp(st.inode, st.mtime)  # a hard link keeps both
    return stamps


def _put_in_place(s: SyncSession, batch: list[Item], last: bool) -> None:
    """A pushed batch into the set: the last one by the commit (one command fewer), the
    others by PLACE_CHECKED_SCRIPT (its journal lines written here from the checked stamps);
    PLACE_SCRIPT where the device must check (sha256, or stats without inodes)."""
    stamps = _arrived(s, batch) if s.verify == "size" else None
    if stamps is None:
        _place(s, batch)
        return
    s.placed_stamps.update(stamps)
    if last:
        s.final = batch
        return
    L = s.layout
    # The journal's line per file: "sha inode size mtime ./rel", as PLACE_SCRIPT writes it.
    lines = "\n".join(f"{it.sha} {stamps[it.file.rel].inode} {it.file.size} {stamps[it.file.rel].mtime} ./{it.file.rel}"
                      for it in batch)
    out = s.script(PLACE_CHECKED_SCRIPT, [L.set_dir, s.run_dir, L.journal, lines, *["./" + it.file.rel for it in batch]],
                   what=f"placing pushed files of {L.kind} {L.name!r}")
    if "@@placed" not in out.split("\n"):
        raise ProvisionError(f"{s.device.name}: placing pushed files in {L.set_dir} failed ({out.strip()[:200]}); "
                             "provision again")
    s.placed += len(batch)


def _arg_cost(it: Item) -> int:
    return 2 * len(it.file.rel.encode()) + 90  # the rel path, "size sha" and quoting


def _place(s: SyncSession, items: list[Item], discard: str = "") -> None:
    """Verify what is in the run folder (exactly `items`) and hard-link it into the set: one
    device command with a fixed number of processes (the caller keeps `items` within
    MAX_COMMAND)."""
    L = s.layout
    if not items:
        if discard:
            s.t.remove(posixpath.join(s.run_dir, discard))
        return
    out = s.script(PLACE_SCRIPT, [s.verify, L.set_dir, s.run_dir, L.journal,
                                  "\n".join(str(it.file.size) for it in items), "\n".join(str(it.sha) for it in items),
                                  discard, *["./" + it.file.rel for it in items]],
                   what=f"verifying pushed files of {L.kind} {L.name!r}", check=False)
    lines = out.split("\n")
    if "@@placed" not in lines:
        bad = [ln for ln in lines if ln.startswith("BAD")]
        raise ProvisionError(f"{s.device.name}: a pushed file did not arrive intact and was discarded "
                             f"({'; '.join(bad) or out.strip()[:200]}); provision again")
    s.placed += len(items)
    # One "@inode mtime" line per item, in argument order (no names to parse back).
    stamps = [ln[1:].split(" ") for ln in lines if ln.startswith("@") and not ln.startswith("@@")]
    for it, parts in zip(items, stamps):
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            s.placed_stamps[it.file.rel] = DeviceStamp(int(parts[0]), int(parts[1]))


__all__ = ["FLUSH_BYTES", "SyncResult", "sync_set"]
