"""Content-addressed, incremental, atomic push of a file set to a device.

Device layout (under the device's work_dir)::

    blobs/<sha256>                 one copy of every file content, shared by all sets
    blobs/.incoming/<run>-<i>.part where a push lands before it is verified
    models/<name>/...              a set: hard links to blobs, under their export names
    runtimes/<name>/...
    manifests/models/<name>.json   the set's manifest, written last and atomically

Why it is cheap when nothing changed: one shell round trip (the *probe*) prints the device
manifest, a `stat` of every file of the set and of every blob. A file is unchanged when its
local sha256 (from the hash cache, keyed by path/size/mtime: no re-hash) equals the manifest's
and its device stat (inode, size, mtime) equals the stamp recorded when it was put in place.
Nothing is re-read on the device.

Why it is safe: a pushed file only gets a real name by `mv` (rename(2), atomic) after its size
was checked on the device; an interrupted push leaves at most a `.part` file, removed by a
later run. Completed blobs are kept, so the next run resumes where this one stopped.
Device-side hashing (`verify="sha256"`) costs a full read of every pushed byte on the device;
the default checks the size only and trusts the link's integrity (adb over USB has CRC'd bulk
transfers, TCP and SSH their own checksums/MACs): the failure that really happens is a
truncated file, which the size catches.

Shared blobs use hard links: they work on Android /data (ext4/f2fs, files owned by shell)
and inside the virtual device (one bubblewrap bind of a host folder is one mount, and links
within a mount are fine); where `ln` fails the script falls back to a copy on the device.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat as stat_mod
import tempfile
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from harness import soc
from harness.errors import ProvisionError, RemoteNoSpaceError, TransportError
from harness.provision.artifacts import ArtifactFile
from harness.provision.hashcache import FileKey, HashCache
from harness.provision.manifest import DeviceStamp, FileEntry, Manifest
from harness.provision.progress import NullProgress, Progress, human_bytes
from harness.provision.types import ProvisionedModel
from harness.transport.base import Transport

FLUSH_BYTES = 256 << 20  # verify+rename pushed blobs at least this often: a crash loses < this much
MAX_COMMAND = 32 << 10  # keep each device command well under adb's 256 KiB service limit
_STAT_FMT = "%i %s %Y %a %n"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


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
    """`@@name` marker lines split the probe's output into sections."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@@"):
            current = sections.setdefault(line[2:].strip(), [])
        elif current is not None:
            current.append(line)
    return sections


# ---- device scripts (constant text; every path arrives as a quoted argv element) ----------

PROBE_SCRIPT = r"""
M=$1; D=$2; B=$3; I=$4
mkdir -p "$I" "${M%/*}" 2>/dev/null
find "$I" -type f -mmin +120 -exec rm -f {} + 2>/dev/null
echo @@soc; getprop ro.soc.model 2>/dev/null
echo @@manifest; cat "$M" 2>/dev/null; echo
echo @@files; [ -d "$D" ] && find "$D" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
echo @@blobs; [ -d "$B" ] && find "$B" -maxdepth 1 -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
echo @@end
"""

# args: verify-mode, then (tmp, size, blob) triples. Prints BAD lines for rejected files.
FINALIZE_SCRIPT = r"""
V=$1; shift; fail=0
while [ $# -ge 3 ]; do
  s=$(stat -c %s "$1" 2>/dev/null)
  ok=0
  if [ "$s" = "$2" ]; then
    ok=1
    if [ "$V" = sha256 ]; then
      h=$(sha256sum "$1" 2>/dev/null); h=${h%% *}
      [ "$h" = "${3##*/}" ] || ok=0
    fi
  fi
  if [ $ok = 1 ]; then mv -f "$1" "$3" || { echo "BAD $1 rename-failed"; fail=1; }
  else echo "BAD $1 size=${s:-missing} want=$2"; rm -f "$1"; fail=1; fi
  shift 3
done
exit $fail
"""

# args: set dir, stale rel paths..., "--", then (blob, rel, chmod-mode or "-") triples.
LINK_SCRIPT = r"""
D=$1; shift
while [ $# -gt 0 ] && [ "$1" != "--" ]; do rm -f "$D/$1"; shift; done
[ "$1" = "--" ] && shift
while [ $# -ge 3 ]; do
  dst="$D/$2"; tmp="$dst.hl$$"
  mkdir -p "${dst%/*}" || { echo "FAIL $2 mkdir"; exit 1; }
  if [ "$3" != - ]; then chmod "$3" "$1" || { echo "FAIL $2 chmod"; exit 1; }; fi
  { ln -f "$1" "$tmp" 2>/dev/null || cp -p "$1" "$tmp"; } && mv -f "$tmp" "$dst" || { rm -f "$tmp"; echo "FAIL $2 link"; exit 1; }
  shift 3
done
find "$D" -depth -mindepth 1 -type d -empty -exec rmdir {} + 2>/dev/null
echo @@stat
find "$D" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
"""


@dataclass(frozen=True)
class DeviceLayout:
    work_dir: str
    kind: str  # "model" | "runtime"
    name: str

    @property
    def set_dir(self) -> str:
        return posixpath.join(self.work_dir, f"{self.kind}s", self.name)

    @property
    def blobs(self) -> str:
        return posixpath.join(self.work_dir, "blobs")

    @property
    def incoming(self) -> str:
        return posixpath.join(self.work_dir, "blobs", ".incoming")

    @property
    def manifest(self) -> str:
        return posixpath.join(self.work_dir, "manifests", f"{self.kind}s", f"{self.name}.json")


@dataclass
class Probe:
    soc_model: str
    manifest: Manifest | None
    files: dict[str, RemoteStatLine]  # rel -> stat, in the set dir
    blobs: dict[str, RemoteStatLine]  # sha -> stat


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
    tmp: str = ""


@dataclass
class _Plan:
    keep: dict[str, str] = field(default_factory=dict)  # rel -> sha (device copy verified)
    link: list[_Item] = field(default_factory=list)  # content already on device as a blob
    push: list[_Item] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)


class _Session:
    """One sync of one set: counts round trips, owns the hashing thread."""

    def __init__(self, transport: Transport, layout: DeviceLayout, cache: HashCache, progress: Progress,
                 verify: str):
        if verify not in ("size", "sha256"):
            raise ValueError(f"verify must be 'size' or 'sha256', not {verify!r}")
        self.t, self.layout, self.cache, self.progress, self.verify = transport, layout, cache, progress, verify
        self.device = transport.device
        self.round_trips = 0
        self.finalized = 0  # pushed files verified and renamed into the blob store
        self.run_id = uuid.uuid4().hex[:12]

    # ---- device calls -------------------------------------------------------------------
    def script(self, script: str, args: Sequence[str], *, check: bool = True, what: str) -> str:
        # No timeout: these scripts only stat/rename/link, and the base shell() pays an
        # extra round trip (pid-file clean-up) for every command given a timeout.
        self.round_trips += 1
        res = self.t.shell(["sh", "-c", script, "sh", *args])
        if check and not res.ok:
            detail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-5:])
            raise ProvisionError(f"{self.device.name}: {what} failed (exit {res.exit_code}): {detail}; "
                                 "run `harness status` on the device and provision again")
        return res.stdout

    def script_batched(self, script: str, head: Sequence[str], items: Sequence[Sequence[str]], *,
                       what: str, tail_head: Sequence[str] = ()) -> list[str]:
        """Run the script over `items` in as few commands as fit MAX_COMMAND."""
        outs, batch, size = [], [], len(script)
        for item in items:
            n = sum(len(a) + 3 for a in item)
            if batch and size + n > MAX_COMMAND:
                outs.append(self.script(script, [*head, *tail_head, *[a for it in batch for a in it]], what=what))
                batch, size = [], len(script)
            batch.append(item)
            size += n
        if batch or not outs:
            outs.append(self.script(script, [*head, *tail_head, *[a for it in batch for a in it]], what=what))
        return outs

    def probe(self) -> Probe:
        L = self.layout
        out = self.script(PROBE_SCRIPT, [L.manifest, L.set_dir, L.blobs, L.incoming], check=False,
                          what="reading the device manifest")
        sec = split_sections(out)
        if "end" not in sec:
            raise ProvisionError(f"{self.device.name}: the device shell did not run the probe script "
                                 f"(output: {out.strip()[:200]!r}); check that `sh`, `find` and `stat` exist there")
        manifest_text = "\n".join(ln for ln in sec.get("manifest", []) if ln.strip())
        manifest = None
        if manifest_text:
            try:
                manifest = Manifest.from_json(manifest_text, f"{self.device.name}:{L.manifest}")
            except ProvisionError:
                manifest = None  # a damaged manifest only means we verify everything again
        prefix = L.set_dir.rstrip("/") + "/"
        files = {s.path[len(prefix):]: s for s in parse_stat_lines(sec.get("files", []))
                 if s.path.startswith(prefix)}
        blobs = {}
        for s in parse_stat_lines(sec.get("blobs", [])):
            base = posixpath.basename(s.path)
            if len(base) == 64 and all(c in "0123456789abcdef" for c in base):
                blobs[base] = s
        soc_lines = [ln.strip() for ln in sec.get("soc", []) if ln.strip()]
        return Probe(soc_model=soc_lines[0] if soc_lines else "", manifest=manifest, files=files, blobs=blobs)

    def check_soc(self, probe: Probe) -> None:
        """The device must be the SoC the inventory says (a wrong serial would push a v79
        export onto a v75 phone that the inventory calls v79)."""
        reported = probe.soc_model
        if not reported:
            return  # no getprop (ssh boards, local host): the inventory is all we have
        info = soc.lookup(reported)
        if info is not None and info.model != self.device.soc_model:
            raise ProvisionError(
                f"{self.device.name}: devices.yaml says {self.device.soc_model} (HTP {self.device.htp_arch}) but the "
                f"device reports ro.soc.model={reported} (HTP {info.htp_arch}); fix `soc:` or the serial in "
                f"{self.device.source or 'devices.yaml'} before provisioning")


def _device_ok(rel: str, probe: Probe) -> FileEntry | None:
    """The device manifest's entry for rel, when the device file still is what was put there."""
    m = probe.manifest
    if m is None or rel not in m.files or rel not in m.device:
        return None
    st = probe.files.get(rel)
    entry, stamp = m.files[rel], m.device[rel]
    if st is None or st.size != entry.size or st.inode != stamp.inode or st.mtime != stamp.mtime:
        return None
    return entry


def _blob_ok(sha: str, size: int, probe: Probe) -> bool:
    st = probe.blobs.get(sha)
    return st is not None and st.size == size


def _plan(items: list[_Item], probe: Probe, cache: HashCache, hasher: ThreadPoolExecutor) -> _Plan:
    plan = _Plan()
    blob_sizes = {st.size for st in probe.blobs.values()}
    # Files whose hash we need before deciding: the device might already hold their content.
    need_hash = []
    for it in items:
        it.sha = cache.lookup(it.key)
        if it.sha is None:
            on_device = _device_ok(it.file.rel, probe)
            if (on_device is not None and on_device.size == it.file.size) or it.file.size in blob_sizes:
                need_hash.append(it)
    for it, sha in zip(need_hash, hasher.map(lambda i: cache.digest(i.file.path), need_hash)):
        it.sha = sha
    for it in items:
        rel = it.file.rel
        if it.sha is None:
            plan.push.append(it)  # nothing of that size on the device: push while hashing
            continue
        on_device = _device_ok(rel, probe)
        if on_device is not None and on_device.sha256 == it.sha and on_device.mode == it.file.mode:
            plan.keep[rel] = it.sha
        elif _blob_ok(it.sha, it.file.size, probe):
            plan.link.append(it)
        else:
            plan.push.append(it)
    local = {it.file.rel for it in items}
    if probe.manifest is not None:
        plan.stale = sorted(rel for rel in probe.manifest.files if rel not in local and rel in probe.files)
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
    """Make `<work_dir>/<kind>s/<name>` on the device hold exactly `files`; push only what differs."""
    cache = cache if cache is not None else HashCache()
    progress = progress or NullProgress()
    layout = DeviceLayout(transport.device.work_dir, kind, safe_name(name))
    s = _Session(transport, layout, cache, progress, verify)
    items = [_Item(f, FileKey.of(f.path)) for f in files]
    hashed_before = cache.hashed_bytes
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="provision-hash") as hasher:
        probe = s.probe()
        s.check_soc(probe)
        plan = _plan(items, probe, cache, hasher)
        pushed_bytes = _push_all(s, plan, hasher) if plan.push else 0
    manifest = Manifest(kind=kind, name=layout.name, remote_dir=layout.set_dir, meta=dict(meta or {}),
                        files={it.file.rel: FileEntry(it.file.rel, it.sha or "", it.file.size, it.file.mode)
                               for it in items})
    result = SyncResult(remote_dir=layout.set_dir, manifest=manifest, bytes_sent=pushed_bytes,
                        files_sent=len(plan.push), files_linked=len(plan.link), files_removed=len(plan.stale))
    if plan.push or plan.link or plan.stale or probe.manifest is None:
        stamps = _link_all(s, plan, items, probe)
    else:
        stamps = {rel: probe.manifest.device[rel] for rel in plan.keep}
    manifest.device = stamps
    if probe.manifest is None or probe.manifest.to_json() != manifest.to_json():
        _write_manifest(s, manifest)
    cache.save()
    result.round_trips = s.round_trips
    result.hashed_bytes = cache.hashed_bytes - hashed_before
    return result


def _push_all(s: _Session, plan: _Plan, hasher: ThreadPoolExecutor) -> int:
    todo = plan.push
    need = sum(it.file.size for it in todo)
    L, dev = s.layout, s.device
    s.round_trips += 1
    free = s.t.free_bytes(L.work_dir)
    margin = 1 << 20  # manifests, directory blocks
    if need + margin > free:
        raise RemoteNoSpaceError(
            f"{dev.name}: not enough space in {L.work_dir} for {L.kind} {L.name!r}: need {human_bytes(need)} "
            f"({need} bytes, {len(todo)} files), {human_bytes(free)} ({free} bytes) free; free space on the "
            f"device (e.g. remove unused sets under {L.work_dir}/models) and provision again")
    # Hash in the background, in push order, while the link carries the bytes.
    for it in todo:
        if it.sha is None:
            it.hash_future = hasher.submit(s.cache.digest, it.file.path)
    s.progress.start(f"{dev.name}: {L.kind} {L.name}", need, len(todo))
    pending: list[_Item] = []
    pending_bytes = 0
    sent = 0
    current: _Item | None = None
    try:
        for i, it in enumerate(todo):
            current = it
            it.tmp = posixpath.join(L.incoming, f"{s.run_id}-{i}.part")
            sent += s.t.push(it.file.path, it.tmp, mode=it.file.mode, progress=s.progress.advance)
            if FileKey.of(it.file.path) != it.key:
                raise ProvisionError(f"{it.file.path}: changed while it was being pushed to {dev.name}; "
                                     "wait until it is written completely and provision again")
            if it.hash_future is not None:
                it.sha = it.hash_future.result()
            current = None
            s.progress.file_done(it.file.rel)
            pending.append(it)
            pending_bytes += it.file.size
            if pending_bytes >= FLUSH_BYTES:
                _finalize(s, pending)
                pending, pending_bytes = [], 0
        _finalize(s, pending)
        pending = []
    except (TransportError, ProvisionError) as exc:
        _salvage(s, pending, current)
        hint = f" ({s.finalized} of {len(todo)} files are safely on the device; provisioning again resumes from there)"
        if isinstance(exc, RemoteNoSpaceError):
            raise RemoteNoSpaceError(f"{dev.name}: no space left while pushing {L.kind} {L.name!r}: needed "
                                     f"{need} bytes, the device said {free} bytes were free ({exc}); free space "
                                     f"and provision again{hint}") from None
        raise type(exc)(f"{exc}{hint}") from None
    s.progress.finish(f"{dev.name}: {L.kind} {L.name}: {len(todo)} files, {human_bytes(sent)} pushed")
    return sent


def _salvage(s: _Session, pending: list[_Item], current: _Item | None) -> None:
    """After a failure: keep the fully pushed blobs (that is what makes the next run resume),
    drop the partial file. Best effort: the link may be gone."""
    try:
        ok = [it for it in pending if it.sha]
        if ok:
            _finalize(s, ok)
        if current is not None and current.tmp:
            s.t.shell(["rm", "-f", current.tmp])
    except Exception:  # noqa: BLE001 - the original error is the one to report
        pass


def _finalize(s: _Session, items: list[_Item]) -> None:
    if not items:
        return
    triples = [(it.tmp, str(it.file.size), posixpath.join(s.layout.blobs, it.sha or "")) for it in items]
    try:
        s.script_batched(FINALIZE_SCRIPT, [s.verify], triples, what="verifying pushed files")
        s.finalized += len(items)
    except ProvisionError as exc:
        raise ProvisionError(f"{exc} (a pushed file did not arrive intact; it was discarded)") from None


def _link_all(s: _Session, plan: _Plan, items: list[_Item], probe: Probe) -> dict[str, DeviceStamp]:
    L = s.layout
    triples = []
    for it in items:
        if it.file.rel in plan.keep:
            continue
        blob_stat = probe.blobs.get(it.sha or "")
        mode = "-"
        if blob_stat is None or blob_stat.mode != it.file.mode:
            # Never take a bit away from a blob another set may share.
            want = it.file.mode | (blob_stat.mode if blob_stat else 0)
            mode = f"{want:o}" if (blob_stat is None or want != blob_stat.mode) else "-"
        triples.append((posixpath.join(L.blobs, it.sha or ""), it.file.rel, mode))
    outs = s.script_batched(LINK_SCRIPT, [L.set_dir], triples, what=f"putting files in place in {L.set_dir}",
                            tail_head=[*plan.stale, "--"])
    stats: dict[str, RemoteStatLine] = {}
    prefix = L.set_dir.rstrip("/") + "/"
    for out in outs:
        for st in parse_stat_lines(split_sections(out).get("stat", [])):
            if st.path.startswith(prefix):
                stats[st.path[len(prefix):]] = st
    stamps = {}
    for it in items:
        st = stats.get(it.file.rel)
        if st is None or st.size != it.file.size:
            raise ProvisionError(f"{s.device.name}: {L.set_dir}/{it.file.rel} is not in place after linking "
                                 f"(device says {st.size if st else 'missing'}, want {it.file.size} bytes); "
                                 "provision again")
        stamps[it.file.rel] = DeviceStamp(st.inode, st.mtime)
    return stamps


def _write_manifest(s: _Session, manifest: Manifest) -> None:
    L = s.layout
    tmp_remote = f"{L.manifest}.{s.run_id}.tmp"
    with tempfile.TemporaryDirectory(prefix="harness-manifest-") as d:
        local = Path(d) / "manifest.json"
        local.write_text(manifest.to_json(), encoding="utf-8")
        s.round_trips += 1  # the probe created the manifest folder
        s.t.push(local, tmp_remote, mode=0o644)
    s.round_trips += 1
    s.t.rename(tmp_remote, L.manifest)



# ---- models -------------------------------------------------------------------------------

def provision_model(
    transport: Transport,
    model_dir: Path | str,
    *,
    name: str | None = None,
    cache: HashCache | None = None,
    progress: Progress | None = None,
    verify: str = "size",
    allow_unknown_target: bool = False,
) -> ProvisionedModel:
    """Validate an export against the device, then push it incrementally to
    `<work_dir>/models/<name>` (default name: the folder's name). Nothing moves when the
    export is incomplete or compiled for another SoC/arch."""
    from harness.provision.artifacts import check_target, load_export
    from harness.provision.hashcache import default_cache
    from harness.provision.manifest import write_local_manifest
    from harness.provision.progress import make_progress

    artifact = load_export(model_dir)
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
for m in "$W"/manifests/*/*.json; do [ -f "$m" ] || continue; echo "@@manifest $m"; cat "$m"; echo; done
echo @@files; for d in "$W/models" "$W/runtimes"; do [ -d "$d" ] && find "$d" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null; done
echo @@blobs; [ -d "$W/blobs" ] && find "$W/blobs" -maxdepth 1 -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
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
    blob_count: int = 0
    blob_bytes: int = 0
    orphan_blobs: int = 0
    orphan_bytes: int = 0
    free_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return all(not s.problems for s in self.sets)

    def __str__(self) -> str:
        free = human_bytes(self.free_bytes) if self.free_bytes is not None else "unknown"
        lines = [f"{self.device}: {self.work_dir} ({free} free; {self.blob_count} blobs, "
                 f"{human_bytes(self.blob_bytes)}; {self.orphan_blobs} unused, {human_bytes(self.orphan_bytes)})"]
        if not self.sets:
            lines.append("  nothing provisioned")
        for st in self.sets:
            what = st.meta.get("model_type") or st.meta.get("runner") or ""
            arch = st.meta.get("htp_arch") or ""
            extra = " ".join(x for x in (what, arch) if x)
            lines.append(f"  {st.kind:<8} {st.name:<32} {st.state:<8} {st.files:>4} files {human_bytes(st.bytes):>10}"
                         f"  {extra}".rstrip())
            lines.extend(f"      ! {p}" for p in st.problems)
        return "\n".join(lines)


def device_status(transport: Transport) -> StatusReport:
    """What is provisioned on a device, each set checked against its manifest (no re-hashing)."""
    device = transport.device
    res = transport.shell(["sh", "-c", STATUS_SCRIPT, "sh", device.work_dir])
    report = StatusReport(device=device.name, work_dir=device.work_dir)
    sections: dict[str, list[str]] = {}
    manifests: list[tuple[str, str]] = []
    current: list[str] | None = None
    for line in res.stdout.splitlines():
        if line.startswith("@@manifest "):
            current = []
            manifests.append((line[len("@@manifest "):], ""))
            sections[f"m{len(manifests)}"] = current
        elif line.startswith("@@"):
            current = sections.setdefault(line[2:].strip(), [])
        elif current is not None:
            current.append(line)
    files = {st.path: st for st in parse_stat_lines(sections.get("files", []))}
    blobs = {posixpath.basename(st.path): st for st in parse_stat_lines(sections.get("blobs", []))}
    used: set[str] = set()
    for i, (path, _) in enumerate(manifests, start=1):
        text = "\n".join(ln for ln in sections.get(f"m{i}", []) if ln.strip())
        try:
            m = Manifest.from_json(text, f"{device.name}:{path}")
        except ProvisionError as exc:
            report.sets.append(SetStatus("?", posixpath.basename(path), "", 0, 0, problems=[str(exc)]))
            continue
        st = SetStatus(m.kind, m.name, m.remote_dir, len(m.files), m.total_bytes, meta=dict(m.meta))
        for rel, entry in sorted(m.files.items()):
            used.add(entry.sha256)
            got = files.get(posixpath.join(m.remote_dir, rel))
            stamp = m.device.get(rel)
            if got is None:
                st.problems.append(f"{rel}: missing")
            elif got.size != entry.size:
                st.problems.append(f"{rel}: {got.size} bytes, manifest says {entry.size}")
            elif stamp is not None and (got.inode, got.mtime) != (stamp.inode, stamp.mtime):
                st.problems.append(f"{rel}: changed on the device since it was provisioned")
        report.sets.append(st)
    report.blob_count = len(blobs)
    report.blob_bytes = sum(b.size for b in blobs.values())
    orphans = [b for sha, b in blobs.items() if sha not in used]
    report.orphan_blobs, report.orphan_bytes = len(orphans), sum(b.size for b in orphans)
    try:
        report.free_bytes = transport.free_bytes(device.work_dir)
    except TransportError:
        report.free_bytes = None
    report.sets.sort(key=lambda s: (s.kind, s.name))
    return report


def remove_unused_blobs(transport: Transport) -> int:
    """Delete blobs no manifest refers to; returns the number removed."""
    res = transport.shell(["sh", "-c", STATUS_SCRIPT, "sh", transport.device.work_dir], check=True)
    used: set[str] = set()
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            try:
                used |= {e.sha256 for e in Manifest.from_json(line, "device").files.values()}
            except ProvisionError:
                return 0  # a damaged manifest: do not guess what is still in use
    blobs = [st.path for st in parse_stat_lines(split_sections(res.stdout).get("blobs", []))
             if posixpath.basename(st.path) not in used]
    if blobs:
        transport.remove(*blobs)
    return len(blobs)


__all__ = [
    "SetStatus", "StatusReport", "device_status", "provision_model", "remove_unused_blobs",
    "DeviceLayout", "FINALIZE_SCRIPT", "LINK_SCRIPT", "PROBE_SCRIPT", "SyncResult", "parse_stat_lines",
    "safe_name", "split_sections", "sync_set",
]
