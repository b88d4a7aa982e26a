"""Content-addressed, incremental, atomic push of a file set to a device.

Device layout (under the device's work_dir)::

    models/<name>/...                  a set, under its export names
    runtimes/<name>/...
    manifests/models/<name>.json       the set's manifest: written last, atomically (rename)
    manifests/models/<name>.journal    files already placed by an unfinished run (resume)
    .incoming/<run>/...                where this run's pushes land before they are verified

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
hash) was checked on the device; it is then hard-linked into place by one `cp -al` (an
existing name is unlinked and linked again: never a truncated file under a real name). An
interrupted run leaves files under `.incoming/` (removed by a later run) and a journal of
what it already placed, so the next run resumes there. Device-side hashing reads every
pushed byte again on the device; the default checks sizes and trusts the link's integrity
(adb over USB has CRC'd bulk transfers, TCP and SSH their own checksums/MACs): the failure
that really happens is a truncated file, which the size catches.

Hard links work on Android /data (ext4/f2fs, files owned by shell) and inside the virtual
device (one bubblewrap bind of a host folder is one mount); `cp -al` is toybox and GNU cp.
"""

from __future__ import annotations

import posixpath
import re
import tempfile
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from harness import soc
from harness.errors import HarnessError, ProvisionError, RemoteNoSpaceError, TransportError
from harness.provision.artifacts import ArtifactFile, ModelArtifact
from harness.provision.hashcache import FileKey, HashCache
from harness.provision.manifest import DeviceStamp, FileEntry, Manifest
from harness.provision.progress import NullProgress, Progress, human_bytes
from harness.provision.types import ProvisionedModel
from harness.transport.base import Transport

FLUSH_BYTES = 256 << 20  # place verified files at least this often: a crash re-sends < this much
MAX_COMMAND = 48 << 10  # keep each device command well under adb's 256 KiB service limit
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
KIND_DIRS = {"model": "models", "runtime": "runtimes"}


def safe_name(name: str) -> str:
    cleaned = _SAFE_NAME.sub("_", name).strip("._") or "set"
    return cleaned[:120]


@dataclass(frozen=True)
class RemoteStatLine:
    inode: int
    size: int
    mtime: int
    mode: int
    path: str


def parse_stat_lines(lines: Sequence[str]) -> list[RemoteStatLine]:
    out = []
    for line in lines:
        parts = line.split(" ", 4)
        if len(parts) != 5 or not all(p.isdigit() for p in parts[:3]):
            continue
        try:
            out.append(RemoteStatLine(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3], 8), parts[4]))
        except ValueError:
            continue
    return out


def split_sections(text: str) -> dict[str, list[str]]:
    """`@@name` marker lines split a script's output into sections."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.split("\n"):  # not splitlines(): a name may hold U+2028, U+0085...
        if line.startswith("@@"):
            current = sections.setdefault(line[2:].strip(), [])
        elif current is not None:
            current.append(line)
    return sections


# ---- device scripts: constant text, every path arrives as a quoted argv element ----------
# Each runs a fixed number of processes (no per-file process), because a process start on a
# device shell costs milliseconds.

# args: work dir, journal path, then (to prepare a push in the same round trip) run dir,
# stale-run parent, manifests dir and the folders to create under the run dir. Manifests are
# one line each: `grep -H ''` prints path:json. Prints the SoC model (if the device has
# getprop) and `df -k` of the work dir; "@@prepared" unless a folder could not be made.
PROBE_SCRIPT = r"""
W=$1; J=$2; R=$3; P=$4; MD=$5; shift 5
if [ -n "$R" ]; then
  find "$P" -mindepth 1 -maxdepth 1 -mmin +120 -exec rm -rf {} + 2>/dev/null
  mkdir -p "$R" "$MD" "$@" && echo @@prepared
  echo @@soc; getprop ro.soc.model 2>/dev/null
  echo @@df; df -k "$W" 2>/dev/null
fi
echo @@manifests; grep -H '' "$W"/manifests/*/*.json 2>/dev/null
echo @@journal; cat "$J" 2>/dev/null
echo @@files; find "$W/models" "$W/runtimes" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
echo @@end
"""

# args: run dir, stale-run parent, work dir, then folders to create. Prints the SoC model
# (if the device has getprop) and `df -k` of the work dir.
PREPARE_SCRIPT = r"""
R=$1; P=$2; W=$3; shift 3
find "$P" -mindepth 1 -maxdepth 1 -mmin +120 -exec rm -rf {} + 2>/dev/null
mkdir -p "$R" "$@" || exit 1
echo @@soc; getprop ro.soc.model 2>/dev/null
echo @@df; df -k "$W" 2>/dev/null
echo @@end
"""

# Names reach the scripts only as argv elements (each one whole: the shell never word-splits
# "$@") and counts (length-delimited groups of them); they are never read back with `read`,
# which strips blanks at the ends, nor printed with `echo`, which mksh and dash let expand
# backslashes. Output that names a file is printf'd with the name at the line's end (export
# names hold no control characters: harness.provision.artifacts); output about the arguments
# comes in argument order, without the names. Runs in Android's mksh + toybox and in dash.

# args: verify mode, set dir, run dir, journal, SIZES and SHAS (one per line, in the order of
# the paths), a partial file to discard first (or ""), "./"+rel paths (never an option, nor
# "-" for stdin)... Checks what arrived in the run dir, places it with one `cp -al`, journals
# it. Nothing but the listed, verified files can be placed. A fixed number of processes and
# no per-file shell loop (each line a shell loop writes costs a pipe write on the device):
# sizes are compared as one string; awk pairs each stat line with its sha, appends the
# journal ("sha inode size mtime ./rel") and prints "@inode mtime" per path, in order.
PLACE_SCRIPT = r"""
V=$1; D=$2; R=$3; J=$4; SIZES=$5; SHAS=$6; X=$7; shift 7
cd "$R" || { echo "BAD run folder missing"; exit 1; }
[ -n "$X" ] && rm -f -- "$X"
n=$(find . -type f | wc -l)
[ "$n" -eq $# ] || { echo "BAD the run folder holds $n files, $# expected"; exit 1; }
bad() {  # $1: what differs; GOT/WANT: one line per path. Names the first such file, drops it.
  i=0; for rel in "$@"; do i=$((i + 1))
    g=$(printf '%s\n' "$GOT" | sed -n "${i}p"); w=$(printf '%s\n' "$WANT" | sed -n "${i}p")
    [ "$g" = "$w" ] || { printf 'BAD %s %s: %s, want %s\n' "$rel" "$K" "${g:-missing}" "$w"; rm -f -- "$rel"; exit 1; }
  done
  echo "BAD $K differs"; exit 1
}
GOT=$(stat -c %s -- "$@" 2>/dev/null)
[ "$GOT" = "$SIZES" ] || { WANT=$SIZES K=size; bad "$@"; }
if [ "$V" = sha256 ]; then
  GOT=$(sha256sum -- "$@" | awk '{ sub(/^\\/, "", $1); print $1 }')
  [ "$GOT" = "$SHAS" ] || { WANT=$SHAS K=sha256; bad "$@"; }
fi
mkdir -p "$D" && cp -alf -- "$R/." "$D/" || { echo "BAD cp -al into the set failed"; exit 1; }
cd "$D" || exit 1
stat -c '%i %s %Y %n' -- "$@" | SHAS=$SHAS J=$J awk '
  BEGIN { n = split(ENVIRON["SHAS"], sha, "\n"); j = ENVIRON["J"] }
  { print sha[NR] " " $0 >> j; print "@" $1 " " $3 }'
find "$R" -type f -exec rm -f {} + 2>/dev/null
echo @@placed
"""

# args: set dir, manifests dir, manifest path, MANIFEST (json or ""), journal, run dir,
# NL, NC, then NL pairs (source path, rel), NC pairs (octal mode, rel), then stale rels.
# Links contents found elsewhere on the device (possibly a file of this set about to go:
# links come first), adds permission bits, removes files the set no longer has, prints the
# stat of every file of the set, then writes the manifest (tmp + rename).
COMMIT_SCRIPT = r"""
D=$1; MD=$2; M=$3; MANIFEST=$4; J=$5; R=$6; NL=$7; NC=$8; shift 8
mkdir -p "$D" "$MD" && cd "$D" || { echo "FAIL cannot enter the set folder"; exit 1; }
while [ "$NL" -gt 0 ]; do
  src=$1; rel=$2; shift 2; NL=$((NL - 1))
  case "$rel" in */*) [ -d "./${rel%/*}" ] || mkdir -p "./${rel%/*}" ;; esac
  ln -f -- "$src" "./$rel" 2>/dev/null || { cp -p -- "$src" "./$rel.cp$$" && mv -f -- "./$rel.cp$$" "./$rel"; } \
    || { printf 'FAIL link %s\n' "$rel"; exit 1; }
done
while [ "$NC" -gt 0 ]; do
  chmod "$1" "./$2" || { printf 'FAIL chmod %s\n' "$2"; exit 1; }
  shift 2; NC=$((NC - 1))
done
for rel in "$@"; do rm -f -- "./$rel"; done
find . -depth -mindepth 1 -type d -empty -exec rmdir {} + 2>/dev/null
echo @@stat
find "$D" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
if [ -n "$MANIFEST" ]; then
  printf '%s\n' "$MANIFEST" > "$M.tmp$$" && mv -f "$M.tmp$$" "$M" && rm -rf "$J" "$R" && echo @@published
fi
"""

# args: tmp manifest, manifest, journal, run dir
PUBLISH_SCRIPT = r"""
mv -f "$1" "$2" && rm -rf "$3" "$4"
"""

# args: manifest, its text, journal, run dir
PUBLISH_INLINE_SCRIPT = r"""
mkdir -p "${1%/*}" && printf '%s\n' "$2" > "$1.tmp$$" && mv -f "$1.tmp$$" "$1" && rm -rf "$3" "$4"
"""


@dataclass(frozen=True)
class DeviceLayout:
    work_dir: str
    kind: str  # "model" | "runtime"
    name: str

    @property
    def set_dir(self) -> str:
        return posixpath.join(self.work_dir, KIND_DIRS[self.kind], self.name)

    @property
    def incoming(self) -> str:
        return posixpath.join(self.work_dir, ".incoming")

    @property
    def manifest(self) -> str:
        return posixpath.join(self.work_dir, "manifests", KIND_DIRS[self.kind], f"{self.name}.json")

    @property
    def journal(self) -> str:
        return posixpath.join(self.work_dir, "manifests", KIND_DIRS[self.kind], f"{self.name}.journal")


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


def parse_manifest_lines(lines: Sequence[str], where: str) -> list[tuple[str, Manifest | ProvisionError]]:
    """`grep -H '' manifests/*/*.json` output (one "path:{json}" line each), parsed; a damaged
    manifest comes back as its error so each caller decides what it means."""
    out: list[tuple[str, Manifest | ProvisionError]] = []
    for line in lines:
        path, sep, text = line.partition(":{")
        if not sep:
            continue
        try:
            out.append((path, Manifest.from_json("{" + text, f"{where}:{path}")))
        except ProvisionError as exc:
            out.append((path, exc))
    return out


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


@dataclass
class _Item:
    file: ArtifactFile
    key: FileKey
    sha: str | None = None
    hash_future: Future | None = None


@dataclass
class _Plan:
    keep: dict[str, Placed] = field(default_factory=dict)  # rel -> this set's verified file
    link: list[tuple[_Item, Placed]] = field(default_factory=list)  # content elsewhere on the device
    chmod: dict[str, int] = field(default_factory=dict)  # rel -> mode (bits are only ever added)
    push: list[_Item] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)


class _Session:
    """One sync of one set: counts round trips, knows the layout and the run id."""

    def __init__(self, transport: Transport, layout: DeviceLayout, cache: HashCache, progress: Progress,
                 verify: str):
        if verify not in ("size", "sha256"):
            raise ValueError(f"verify must be 'size' or 'sha256', not {verify!r}")
        self.t, self.layout, self.cache, self.progress, self.verify = transport, layout, cache, progress, verify
        self.device = transport.device
        self.round_trips = 0
        self.placed = 0  # files verified and put in place by this run
        self.placed_stamps: dict[str, DeviceStamp] = {}
        self.df_free: int | None = None
        self.prepared = False  # run folder tree made, SoC checked, df read (by the probe)
        self.run_dir = posixpath.join(layout.incoming, uuid.uuid4().hex[:12])

    def script(self, script: str, args: Sequence[str], *, what: str, check: bool = True) -> str:
        # No timeout: these scripts only stat/link/rename, and the base shell() pays an extra
        # round trip (pid-file clean-up) for every command given a timeout.
        self.round_trips += 1
        res = self.t.shell(["sh", "-c", script, "sh", *args])
        if check and not res.ok:
            detail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-5:])
            raise ProvisionError(f"{self.device.name}: {what} failed (exit {res.exit_code}): {detail}; "
                                 "run `harness status` for the device and provision again")
        return res.stdout

    def _run_dirs(self, items: Sequence[_Item]) -> list[str]:
        return sorted({posixpath.join(self.run_dir, posixpath.dirname(it.file.rel))
                       for it in items if "/" in it.file.rel})

    def probe(self, items: Sequence[_Item]) -> Probe:
        """Read the manifests, journal and stats and, in the same round trip, prepare a push of
        any of `items` (run folder tree for all of them: a few folders more than needed cost
        nothing, a second round trip does); the tree goes with the run's clean-up."""
        L = self.layout
        dirs = self._run_dirs(items)
        prep = sum(len(d) + 3 for d in dirs) < MAX_COMMAND // 2  # else a separate prepare()
        args = [L.work_dir, L.journal, *([self.run_dir, L.incoming, posixpath.dirname(L.manifest), *dirs]
                                         if prep else ["", "", ""])]
        out = self.script(PROBE_SCRIPT, args, what="reading the device manifests", check=False)
        probe = parse_probe(out, L, self.device.name)
        if prep and "@@prepared" in out.split("\n"):
            self._prepared(out)
        return probe

    def prepare(self, items: Sequence[_Item]) -> None:
        """Create the run folder tree (when the probe could not)."""
        out = self.script(PREPARE_SCRIPT, [self.run_dir, self.layout.incoming, self.layout.work_dir,
                                           *self._run_dirs(items), posixpath.dirname(self.layout.manifest)],
                          what="preparing the push")
        self._prepared(out)

    def _prepared(self, out: str) -> None:
        """Check the device is the SoC the inventory says (a wrong serial would put a v79
        export on a v75 phone the inventory calls v79); note the free space."""
        self.prepared = True
        self.df_free = parse_df(split_sections(out).get("df", []))
        reported = next((ln.strip() for ln in split_sections(out).get("soc", []) if ln.strip()), "")
        info = soc.lookup(reported) if reported else None
        if info is not None and info.model != self.device.soc_model:
            raise ProvisionError(
                f"{self.device.name}: devices.yaml says {self.device.soc_model} (HTP {self.device.htp_arch}) but the "
                f"device reports ro.soc.model={reported} (HTP {info.htp_arch}); fix `soc:` or the serial in "
                f"{self.device.source or 'devices.yaml'} before provisioning")


def _plan(items: list[_Item], probe: Probe, cache: HashCache, hasher: ThreadPoolExecutor, set_dir: str) -> _Plan:
    plan = _Plan()
    sizes_on_device = {p.size for p in probe.contents.values()}
    # Hash first only where the device may already hold the content; otherwise push at once
    # and hash in the background while the bytes travel.
    need_hash = []
    for it in items:
        it.sha = cache.lookup(it.key)
        if it.sha is None and it.file.size in sizes_on_device:
            need_hash.append(it)
    for it, sha in zip(need_hash, hasher.map(lambda i: cache.digest(i.file.path), need_hash)):
        it.sha = sha
    for it in items:
        rel = it.file.rel
        if it.sha is None:
            plan.push.append(it)
            continue
        mine = probe.mine.get(rel)
        if mine is not None and mine.sha256 == it.sha:
            placed = plan.keep[rel] = mine
        elif it.sha in probe.contents:
            placed = probe.contents[it.sha]
            plan.link.append((it, placed))
        else:
            plan.push.append(it)
            continue
        # Hard links share one mode: add missing bits (e.g. +x), never take any away.
        if it.file.mode & ~placed.mode & 0o7777:
            plan.chmod[rel] = placed.mode | it.file.mode
    local = {it.file.rel for it in items}
    prefix = set_dir.rstrip("/") + "/"
    previously = set(probe.manifest.files) if probe.manifest is not None else set()
    previously |= set(probe.mine)
    plan.stale = sorted(rel for rel in previously if rel not in local and prefix + rel in probe.files)
    return plan


def sync_set(
    transport: Transport,
    files: Sequence[ArtifactFile],
    *,
    kind: str,
    name: str,
    meta: dict[str, Any] | None = None,
    cache: HashCache | None = None,
    progress: Progress | None = None,
    verify: str = "size",
) -> SyncResult:
    """Make `<work_dir>/<kind>s/<name>` on the device hold exactly `files`; push only what
    the device does not already hold (in this set or any other)."""
    if kind not in KIND_DIRS:
        raise ValueError(f"kind must be one of {sorted(KIND_DIRS)}, not {kind!r}")
    cache = cache if cache is not None else HashCache()
    progress = progress or NullProgress()
    layout = DeviceLayout(transport.device.work_dir, kind, safe_name(name))
    s = _Session(transport, layout, cache, progress, verify)
    items = [_Item(f, FileKey.of(f.path)) for f in files]
    hashed_before = cache.hashed_bytes
    fast = _unchanged_by_file_protocol(s, items, meta or {})
    if fast is not None:
        cache.save()
        fast.hashed_bytes = cache.hashed_bytes - hashed_before
        return fast
    hasher = ThreadPoolExecutor(max_workers=2, thread_name_prefix="provision-hash")
    try:
        probe = s.probe(items)
        plan = _plan(items, probe, cache, hasher, layout.set_dir)
        pushed = _push_all(s, plan, hasher) if plan.push else 0
    finally:
        # After a failure, do not go on hashing gigabytes nobody will push; keep what was hashed.
        hasher.shutdown(wait=True, cancel_futures=True)
        cache.save()
    manifest = Manifest(kind=kind, name=layout.name, remote_dir=layout.set_dir, meta=dict(meta or {}),
                        files={it.file.rel: FileEntry(it.file.rel, it.sha or "", it.file.size, it.file.mode)
                               for it in items})
    result = SyncResult(remote_dir=layout.set_dir, manifest=manifest, bytes_sent=pushed,
                        files_sent=len(plan.push), files_linked=len(plan.link), files_removed=len(plan.stale))
    complete = (probe.manifest is not None and len(plan.keep) == len(items) and not plan.stale and not plan.chmod
                and all(probe.manifest.device.get(rel) == p.stamp for rel, p in plan.keep.items()))
    if not complete:
        _commit(s, plan, items, manifest)
    else:
        manifest.device = {rel: p.stamp for rel, p in plan.keep.items()}
        if probe.manifest.to_json() != manifest.to_json():  # same files, new meta
            _publish(s, manifest)
    cache.save()
    result.round_trips = s.round_trips
    result.hashed_bytes = cache.hashed_bytes - hashed_before
    return result


def _unchanged_by_file_protocol(s: _Session, items: list[_Item], meta: dict[str, Any]) -> SyncResult | None:
    """The nightly common case without any device process: the set's manifest (read over the
    transport's file protocol) names exactly these contents, and every device file still has
    the inode, size and mtime recorded when it was placed and at least the local mode bits.
    Any doubt (journal, other meta, a changed or unknown stamp) returns None: the full probe
    decides then."""
    L = s.layout
    try:
        blobs = s.t.read_small_files([L.manifest, L.journal])
    except TransportError:
        return None
    raw = blobs.get(L.manifest)
    if raw is None or blobs.get(L.journal) is not None:
        return None
    try:
        manifest = Manifest.from_json(raw.decode("utf-8"), L.manifest)
    except (ProvisionError, ValueError):
        return None
    local = {it.file.rel: it for it in items}
    if manifest.meta != meta or manifest.remote_dir != L.set_dir or set(manifest.files) != set(local):
        return None
    for rel, it in local.items():
        entry = manifest.files[rel]
        if entry.size != it.file.size or entry.mode != it.file.mode or rel not in manifest.device:
            return None
        it.sha = s.cache.lookup(it.key) or s.cache.digest(it.file.path)
        if it.sha != entry.sha256:
            return None
    try:
        stats = s.t.stat_many([posixpath.join(L.set_dir, rel) for rel in local])
    except TransportError:
        return None
    for rel, it in local.items():
        st, stamp = stats.get(posixpath.join(L.set_dir, rel)), manifest.device[rel]
        if (st is None or not st.inode or st.inode != stamp.inode or st.mtime != stamp.mtime
                or st.size != it.file.size or it.file.mode & ~st.mode & 0o7777):
            return None
    return SyncResult(remote_dir=L.set_dir, manifest=manifest)


def _push_all(s: _Session, plan: _Plan, hasher: ThreadPoolExecutor) -> int:
    todo = plan.push
    need = sum(it.file.size for it in todo)
    L, dev = s.layout, s.device
    if not s.prepared:
        s.prepare(todo)
    if s.df_free is not None and s.t.free_bytes_is_df:
        free = s.df_free  # what the transport's own free_bytes would have asked, one round trip less
    else:
        s.round_trips += 1
        free = s.t.free_bytes(L.work_dir)
    margin = 1 << 20  # manifests, journal, directory blocks
    if need + margin > free:
        raise RemoteNoSpaceError(
            f"{dev.name}: not enough space in {L.work_dir} for {L.kind} {L.name!r}: need {human_bytes(need)} "
            f"({need} bytes, {len(todo)} files), {human_bytes(free)} ({free} bytes) free; free space on the "
            f"device (e.g. remove unused sets under {L.work_dir}/models) and provision again")
    # Unknown contents are hashed from the very chunks the transport sends (one read of each
    # file) where it can; elsewhere in the background, in push order, while the link works.
    inline_hash = getattr(s.t, "hashes_while_pushing", False)
    for it in todo:
        if it.sha is None and not inline_hash:
            it.hash_future = hasher.submit(s.cache.digest, it.file.path)
    s.progress.start(f"{dev.name}: {L.kind} {L.name}", need, len(todo))
    pending: list[_Item] = []
    partials: list[_Item] = []  # pushed but not confirmed (or changed): never placed
    sent = 0
    try:
        # Batches hold one place command's worth of files; each goes over the link back to back.
        for batch in _batches(todo):
            by_remote = {posixpath.join(s.run_dir, it.file.rel): it for it in batch}
            arrived: list[_Item] = []

            def confirmed(remote: str) -> None:
                arrived.append(by_remote[remote])
                s.progress.file_done(by_remote[remote].file.rel)

            def hashed(remote: str, sha: str) -> None:
                it = by_remote[remote]
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
            _place(s, batch)
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


def _free_now(s: _Session) -> int | None:
    try:
        return s.t.free_bytes(s.layout.work_dir)
    except HarnessError:  # a best-effort figure for the message; the failure is reported anyway
        return None


def _batches(todo: list[_Item]) -> list[list[_Item]]:
    """Split the pushes so the run folder holds one place command's worth of files at a time."""
    out: list[list[_Item]] = []
    batch: list[_Item] = []
    size = args = 0
    for it in todo:
        batch.append(it)
        size += it.file.size
        args += _arg_cost(it)
        if size >= FLUSH_BYTES or args >= MAX_COMMAND:
            out.append(batch)
            batch, size, args = [], 0, 0
    if batch:
        out.append(batch)
    return out


def _salvage(s: _Session, pending: list[_Item], partials: list[_Item]) -> None:
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


def _arg_cost(it: _Item) -> int:
    return 2 * len(it.file.rel.encode()) + 90  # the rel path, "size sha" and quoting


def _place(s: _Session, items: list[_Item], discard: str = "") -> None:
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


MAX_INLINE_MANIFEST = 64 << 10  # larger manifests are pushed as a file


def _commit(s: _Session, plan: _Plan, items: list[_Item], manifest: Manifest) -> None:
    """Link contents found elsewhere, drop stale files, read back every file's stamp and
    publish the manifest, in one command. The manifest is written with the stamps the files
    must have (kept, placed or hard-linked: the inode and mtime are known); if the device
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
        out = s.script(COMMIT_SCRIPT, [L.set_dir, posixpath.dirname(L.manifest), L.manifest, inline if last else "",
                                       L.journal, s.run_dir, str(len(links) // 2), str(len(chmods) // 2),
                                       *links, *chmods, *stale],
                       what=f"putting files in place in {L.set_dir}")
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
        _publish(s, manifest)


def _publish(s: _Session, manifest: Manifest) -> None:
    """The manifest goes last: written under a temporary name, renamed over the old one."""
    L = s.layout
    text = manifest.to_json()
    if len(text) <= MAX_INLINE_MANIFEST:
        s.script(PUBLISH_INLINE_SCRIPT, [L.manifest, text, L.journal, s.run_dir], what="writing the manifest")
        return
    tmp_remote = f"{L.manifest}.{posixpath.basename(s.run_dir)}.tmp"
    with tempfile.TemporaryDirectory(prefix="harness-manifest-") as d:
        local = Path(d) / "manifest.json"
        local.write_text(text, encoding="utf-8")
        s.round_trips += 1
        s.t.push(local, tmp_remote, mode=0o644)
    s.script(PUBLISH_SCRIPT, [tmp_remote, L.manifest, L.journal, s.run_dir], what="writing the manifest")


def parse_df(lines: Sequence[str]) -> int | None:
    """Free bytes from `df -k` output (header, then one row that a long name may wrap)."""
    rows = [ln for ln in lines if ln.strip()]
    if len(rows) < 2:
        return None
    nums = [c for c in " ".join(rows[1:]).split() if c.isdigit()]
    return int(nums[2]) * 1024 if len(nums) >= 3 else None


# ---- models -------------------------------------------------------------------------------

def provision_model(
    transport: Transport,
    model_dir: Path | str,
    *,
    artifact: ModelArtifact | None = None,
    name: str | None = None,
    cache: HashCache | None = None,
    progress: Progress | None = None,
    verify: str = "size",
    allow_unknown_target: bool = False,
    follow_external_links: bool = False,
) -> ProvisionedModel:
    """Validate an export against the device, then push it incrementally to
    `<work_dir>/models/<name>` (default name: the folder's name). Nothing moves when the
    export is incomplete or compiled for another SoC/arch. Symlinks leaving the export are
    refused unless `follow_external_links` (artifacts.py states the rule). `artifact`: the export
    when the caller already read it (load_export), so it is not read twice."""
    from harness.provision.artifacts import check_target, load_export
    from harness.provision.hashcache import default_cache
    from harness.provision.manifest import write_local_manifest
    from harness.provision.progress import make_progress

    if artifact is None:
        artifact = load_export(model_dir, follow_external_links=follow_external_links)
    check_target(artifact, transport.device, allow_unknown_target=allow_unknown_target)
    target = artifact.target
    meta: dict[str, Any] = {"kind": artifact.kind, "model_type": artifact.model_type, "configs": artifact.configs,
                            "source": str(artifact.root)}
    if target is not None:
        meta.update({k: v for k, v in (("soc_id", target.soc_id), ("htp_arch", target.htp_arch)) if v is not None})
    result = sync_set(transport, artifact.files, kind="model", name=name or artifact.root.name, meta=meta,
                      cache=cache if cache is not None else default_cache(), progress=progress or make_progress(),
                      verify=verify)
    write_local_manifest(artifact.root, result.manifest)
    return ProvisionedModel(device=transport.device.name, remote_dir=result.remote_dir, kind=artifact.kind,
                            model_type=artifact.model_type, configs=dict(artifact.configs),
                            bytes_sent=result.bytes_sent, files_sent=result.files_sent)


# ---- status -------------------------------------------------------------------------------

STATUS_SCRIPT = r"""
W=$1
echo @@manifests; grep -H '' "$W"/manifests/*/*.json 2>/dev/null
echo @@journals; ls "$W"/manifests/*/*.journal 2>/dev/null
echo @@files; find "$W/models" "$W/runtimes" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
echo @@incoming; find "$W/.incoming" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
echo @@end
"""


@dataclass
class SetStatus:
    kind: str
    name: str
    remote_dir: str
    files: int
    bytes: int
    meta: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        return "ok" if not self.problems else "damaged"


@dataclass
class StatusReport:
    device: str
    work_dir: str
    sets: list[SetStatus] = field(default_factory=list)
    stored_bytes: int = 0  # distinct contents (hard-linked files count once)
    unfinished: list[str] = field(default_factory=list)  # sets with a resume journal
    leftover_files: int = 0  # partial pushes under .incoming
    leftover_bytes: int = 0
    free_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return all(not s.problems for s in self.sets)

    def __str__(self) -> str:
        free = human_bytes(self.free_bytes) if self.free_bytes is not None else "unknown"
        n = len(self.sets)
        lines = [f"{self.device}: {self.work_dir}: {n} set{'' if n == 1 else 's'}, "
                 f"{human_bytes(self.stored_bytes)} stored, {free} free"]
        if not self.sets:
            lines.append("  nothing provisioned")
        for st in self.sets:
            what = " ".join(str(x) for x in (st.meta.get("model_type") or st.meta.get("runner"),
                                             st.meta.get("htp_arch")) if x)
            lines.append(f"  {st.kind:<8} {st.name:<32} {st.state:<8} {st.files:>4} files {human_bytes(st.bytes):>10}"
                         f"  {what}".rstrip())
            lines.extend(f"      ! {p}" for p in st.problems)
        if self.unfinished:
            lines.append(f"  unfinished pushes (provision again to resume): {', '.join(self.unfinished)}")
        if self.leftover_files:
            lines.append(f"  {self.leftover_files} partial files ({human_bytes(self.leftover_bytes)}) under "
                         f"{self.work_dir}/.incoming (removed by the next push after 2 hours)")
        return "\n".join(lines)


def device_status(transport: Transport) -> StatusReport:
    """What is provisioned on a device, each set checked against its manifest (no re-hashing)."""
    device = transport.device
    res = transport.shell(["sh", "-c", STATUS_SCRIPT, "sh", device.work_dir])
    sec = split_sections(res.stdout)
    report = StatusReport(device=device.name, work_dir=device.work_dir)
    files = {st.path: st for st in parse_stat_lines(sec.get("files", []))}
    for path, m in parse_manifest_lines(sec.get("manifests", []), device.name):
        if isinstance(m, ProvisionError):
            report.sets.append(SetStatus("?", posixpath.basename(path), "", 0, 0, problems=[str(m)]))
            continue
        st = SetStatus(m.kind, m.name, m.remote_dir, len(m.files), m.total_bytes, meta=dict(m.meta))
        for rel, entry in sorted(m.files.items()):
            got = files.get(posixpath.join(m.remote_dir, rel))
            stamp = m.device.get(rel)
            if got is None:
                st.problems.append(f"{rel}: missing")
            elif got.size != entry.size:
                st.problems.append(f"{rel}: {got.size} bytes, manifest says {entry.size}")
            elif stamp is not None and (got.inode, got.mtime) != (stamp.inode, stamp.mtime):
                st.problems.append(f"{rel}: changed on the device since it was provisioned")
        report.sets.append(st)
    report.stored_bytes = sum({st.inode: st.size for st in files.values()}.values())
    report.unfinished = sorted(posixpath.basename(p)[: -len(".journal")] for p in sec.get("journals", [])
                               if p.endswith(".journal"))
    leftovers = parse_stat_lines(sec.get("incoming", []))
    report.leftover_files, report.leftover_bytes = len(leftovers), sum(x.size for x in leftovers)
    try:
        report.free_bytes = transport.free_bytes(device.work_dir)
    except TransportError:
        report.free_bytes = None
    report.sets.sort(key=lambda s: (s.kind, s.name))
    return report


def remove_set(transport: Transport, kind: str, name: str) -> None:
    """Remove a provisioned set (its manifest first, so a half-removed set is never trusted).
    Contents other sets share stay: they are hard links."""
    layout = DeviceLayout(transport.device.work_dir, kind, safe_name(name))
    transport.remove(layout.manifest, layout.journal)
    transport.remove(layout.set_dir, recursive=True)


__all__ = [
    "SetStatus", "StatusReport", "device_status", "provision_model", "remove_set",
    "DeviceLayout", "PROBE_SCRIPT", "SyncResult", "parse_stat_lines",
    "safe_name", "split_sections", "sync_set",
]
